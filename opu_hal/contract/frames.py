"""Raw camera frames: the optional part of the device contract that calibration measures.

A device whose ``capabilities.raw_frames`` is true returns, from
:meth:`~opu_hal.contract.device.Device.raw_frames`, frames of one illumination in the DN its ADC
gave: ``"dark"`` (every light source off), ``"anchor"`` (the reference beam alone, a flat field)
or ``"signal"`` (the speckle of one input ``pattern``, anchor off).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

ILLUMINATIONS = ("dark", "anchor", "signal")


@dataclass(frozen=True)
class RawFrames:
    """``dn``: ``(n_frames, pixels)`` ADC output at ``temperature_c`` and ``exposure_us``.

    ``photons_per_pixel``: what the device knows of its illumination (power, wavelength,
    exposure), not the camera's hidden quantum efficiency (``None`` for a speckle pattern).
    ``power_uw``: the illumination's optical power (0 for dark frames). ``max_dn``: the top of
    the ADC range (a read there may be clipped). ``clipped``: reads the device knows were clipped.
    """

    dn: torch.Tensor
    illumination: str
    temperature_c: float
    exposure_us: float
    photons_per_pixel: float | None
    clipped: int
    power_uw: float = 0.0
    max_dn: int | None = None
