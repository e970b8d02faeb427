"""Raw camera frames of the simulated OPU, in DN, for calibration (the capability a real camera's
SDK gives as its raw intensity output).

Three illuminations, at the device's current temperature and at any exposure: ``"dark"`` (laser
and anchor off), ``"anchor"`` (the reference beam alone, a flat field of ``anchor_power_uw``) and
``"signal"`` (the speckle of one DMD ``pattern``, anchor off). Frames go through the same camera
read as projections (:meth:`.camera.Sensor.read`) and are turned back into the DN the ADC gave.
``photons_per_pixel`` is what the device knows of its illumination (power, wavelength, exposure),
not the camera's hidden quantum efficiency.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from ...contract.errors import InputError
from ...contract.frames import ILLUMINATIONS, RawFrames
from .camera import Sensor
from .optics import TransmissionMatrix
from .photons import electrons_per_pixel, photons_per_pixel
from .profile import SimulatedProfile


def raw_frames(
    profile: SimulatedProfile,
    sensor: Sensor,
    optics: TransmissionMatrix,
    generator: torch.Generator,
    illumination: str,
    n_frames: int,
    *,
    exposure_us: float | None = None,
    anchor_power_uw: float | None = None,
    pattern: torch.Tensor | None = None,
    prnu: torch.Tensor | None = None,
    anchor_profile: torch.Tensor | None = None,
) -> RawFrames:
    """``n_frames`` frames of ``illumination`` through ``sensor`` (at its temperature) and ``exposure_us``;
    ``optics`` makes a pattern's speckle, ``generator`` draws the frames; ``prnu`` multiplies every
    pixel's photo-electrons, ``anchor_profile`` the anchor's (:func:`opu_hal.camera.pixel_maps.light_response_map`)."""
    if illumination not in ILLUMINATIONS:
        raise InputError(f"illumination {illumination!r}; allowed: {', '.join(ILLUMINATIONS)}")
    if not (isinstance(n_frames, int) and n_frames >= 1):
        raise InputError(f"n_frames must be an integer >= 1, got {n_frames!r}")
    exposure = profile.exposure_us if exposure_us is None else float(exposure_us)
    if not (math.isfinite(exposure) and 0 < exposure <= 1e7):
        raise InputError(f"exposure_us {exposure} is outside (0, 1e7] us")
    sensor = dataclasses.replace(sensor, exposure_us=exposure)
    pixels, compute, n_in = profile.out_features, optics.device, profile.in_features
    photons: float | None = 0.0
    power = 0.0
    if illumination == "dark":
        signal = torch.zeros(pixels, device=compute)
    elif illumination == "anchor":
        power = profile.anchor_power_uw if anchor_power_uw is None else float(anchor_power_uw)
        if not (math.isfinite(power) and 0 <= power <= 1e6):
            raise InputError(f"anchor_power_uw {power} is outside [0, 1e6] uW")
        photons = photons_per_pixel(power, profile, exposure)
        signal = torch.full((pixels,), electrons_per_pixel(power, profile, exposure), device=compute)
        if anchor_profile is not None:
            signal = signal * anchor_profile.to(compute)
    else:
        if pattern is None or pattern.shape != (n_in,):
            raise InputError(f"illumination 'signal' needs a pattern of shape ({n_in},)")
        real, imag = optics.field(pattern.float().unsqueeze(0))
        power = profile.laser_power_uw
        phi = electrons_per_pixel(power, profile, exposure)
        signal = ((real**2 + imag**2) * (phi / n_in))[0]
        photons = None
    if prnu is not None:
        signal = signal * prnu.to(compute)
    electrons, clipped = sensor.read(signal.expand(n_frames, -1).contiguous(), generator)
    dn = torch.round((electrons + sensor.pixel_dark_e) / sensor.gain_e_per_dn) + sensor.black_level_dn
    return RawFrames(
        dn=dn.cpu(),
        illumination=illumination,
        temperature_c=sensor.temperature_c,
        exposure_us=exposure,
        photons_per_pixel=photons,
        clipped=clipped,
        power_uw=float(power),
        max_dn=sensor.max_dn,
    )
