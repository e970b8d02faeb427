"""The simulated OPU's privacy anchor as LightOn optics give it: a DMD pattern through the scattering
medium, read as speckle (paper 000, eq. 5: ``z = x T`` with ``T_jk ~ CN(0, 1)``).

The anchor pattern (on mirrors outside the input's, :mod:`.reference`) lights pixel ``j`` of the
privacy region with ``A^2 |u_j|^2``, ``u_j = sum_k T'_jk / sqrt(m) ~ CN(0, 1)``: exponentially
distributed over pixels with mean ``A^2`` (``A^2`` the anchor's mean electrons per pixel,
:func:`.photons.electrons_per_pixel` of ``anchor_power_uw``). The region is the whole sensor
(``sensor_pixels``); at the pixels a projection reads it is the linear mode's own reference, beyond
them the same law (:func:`speckle_intensity`). Each pixel's
read mean is ``lambda_j = A^2 s_j w_j d_j + D m_j``: speckle ``s_j``, PRNU ``w_j``, defect factor
``d_j`` (0 for a dead pixel, ``dim_pixel_factor`` for a dim one), dark signal ``D`` times the pixel's
DSNU multiplier ``m_j`` (:mod:`opu_hal.camera.pixel_maps`). It is seeded physics, like the matrix;
calibration measures it (:mod:`opu_hal.calibration.anchor_map`), and privacy counts are drawn at each
pixel's own ``lambda_j`` (:mod:`.speckle_privacy`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

import numpy as np
import torch

from ...camera.pixel_maps import dark_signal_map, light_response_map
from ...randomness.seeding import stream_seed
from .camera import Sensor
from .dither import profile_band
from .profile import SimulatedProfile
from .reference import ReferenceField


def defect_factors(seed: int, pixels: int, dead: float, dim: float, dim_factor: float) -> np.ndarray:
    """Per-pixel response factor: 0 for a dead pixel, ``dim_factor`` for a dim one, 1 otherwise."""
    rng = np.random.default_rng(stream_seed(seed, "defects"))
    u = rng.random(pixels)
    return np.where(u < dead, 0.0, np.where(u < dead + dim, dim_factor, 1.0))


def speckle_intensity(profile: SimulatedProfile) -> np.ndarray:
    """``s_j`` at every sensor pixel: at the pixels a projection reads, the intensity of the linear mode's
    speckle reference (:class:`.reference.ReferenceField`: the anchor pattern on mirrors outside the
    input's, through the medium; the same light whether it serves the projection or privacy), and beyond
    them (columns no projection uses) the field's exact law, ``CN(0, 1)``, drawn from a seeded stream:
    the same distribution without generating the medium at every sensor pixel."""
    read = min(profile.out_features, profile.sensor_pixels)
    band = profile_band(profile)
    inside = ReferenceField.build("speckle", profile.seed, read, torch.device("cpu"), band).intensity.numpy()
    rest = np.random.default_rng(stream_seed(profile.seed, "anchor-speckle")).standard_normal(
        (2, profile.sensor_pixels - read)
    )
    return np.concatenate([inside, 0.5 * (rest[0] ** 2 + rest[1] ** 2)])


class SpeckleAnchor:
    """Per-pixel relative light and dark multipliers of the privacy anchor over the sensor."""

    def __init__(self, profile: SimulatedProfile) -> None:
        pixels = profile.sensor_pixels
        speckle = speckle_intensity(profile)
        prnu, _ = light_response_map(profile.seed, pixels, profile.prnu_rms, 0.0)
        response = np.ones(pixels) if prnu is None else prnu.double().numpy()
        defects = defect_factors(
            profile.seed, pixels, profile.dead_pixel_fraction, profile.dim_pixel_fraction, profile.dim_pixel_factor
        )
        self.relative_light = speckle * response * defects
        dark = dark_signal_map(
            profile.seed, pixels, profile.dsnu_rms, profile.hot_pixel_fraction, profile.hot_pixel_factor
        )
        self.dark_multiplier = np.ones(pixels) if dark is None else dark.double().numpy()
        self.power_factor = 1.0  # the anchor laser's power over its nominal value (drift)
        self._means: tuple[tuple[float, float, float], np.ndarray] | None = None  # means_e's last result

    @property
    def pixels(self) -> int:
        return int(self.relative_light.size)

    def means_e(self, anchor_e: float, sensor: Sensor) -> np.ndarray:
        """``lambda_j``: mean electrons of one anchor read at every pixel of the sensor (read-only). The
        same array while the anchor's power, ``anchor_e`` and the dark signal stay the same, so that a
        draw does not recompute the whole sensor (a per-draw cost of milliseconds at 2.2 M pixels)."""
        key = (self.power_factor, anchor_e, sensor.dark_e)
        if self._means is None or self._means[0] != key:
            means = self.power_factor * anchor_e * self.relative_light + sensor.dark_e * self.dark_multiplier
            means.flags.writeable = False
            self._means = (key, means)
        return self._means[1]

    def frames_dn(
        self, means_e: np.ndarray, sensor: Sensor, n_frames: int, generator: torch.Generator
    ) -> Iterator[np.ndarray]:
        """``n_frames`` anchor frames in DN, one at a time: Poisson electrons, full well, read noise,
        gain, black level and the ADC's range (the camera stream: calibration and drift reads). Drawn
        on the generator's device (a CUDA camera's stream on a GPU), returned on the host."""
        rates = torch.tensor(means_e, device=generator.device)  # a copy: the means may be read-only
        for _ in range(n_frames):
            electrons = torch.poisson(rates, generator=generator).clamp_(max=sensor.full_well_e)
            noise = torch.randn(rates.shape, generator=generator, dtype=torch.float64, device=rates.device)
            electrons += sensor.read_noise_e * noise
            dn = torch.round(electrons / sensor.gain_e_per_dn) + sensor.black_level_dn
            yield dn.clamp_(0, sensor.max_dn).cpu().numpy()


_CACHE: dict[tuple, SpeckleAnchor] = {}


def speckle_anchor(profile: SimulatedProfile) -> SpeckleAnchor:
    """The anchor of ``profile``'s physics, computed once per process (the whole sensor's speckle costs
    seconds); each device gets its own copy of the drift state (``power_factor``)."""
    key = (
        profile.seed,
        profile.in_features,
        profile.out_features,
        profile_band(profile),  # the pixels read (derived from the camera without a declared band)
        profile.sensor_pixels,
        profile.prnu_rms,
        profile.dead_pixel_fraction,
        profile.dim_pixel_fraction,
        profile.dim_pixel_factor,
        profile.dsnu_rms,
        profile.hot_pixel_fraction,
        profile.hot_pixel_factor,
    )
    if key not in _CACHE:
        _CACHE.clear()  # one sensor's maps at a time (tens of MB for a full sensor)
        _CACHE[key] = SpeckleAnchor(profile)
    anchor = copy.copy(_CACHE[key])
    anchor.power_factor = 1.0
    anchor._means = None
    return anchor
