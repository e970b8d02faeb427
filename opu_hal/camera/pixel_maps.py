"""Dark-signal non-uniformity (DSNU) and hot pixels of the simulated camera.

Every pixel's dark current is the sensor's mean rate times a fixed multiplier ``m_j``: a
log-normal spread of log-std ``dsnu_rms`` (the fixed-pattern part of dark current, EMVA 1288
"DSNU") and a fraction ``hot_pixel_fraction`` of hot pixels whose multiplier is ``hot_pixel_factor``
times larger. The map is normalised to mean 1 over the pixels read, so the profile's
``dark_fom_na_per_cm2`` stays the figure of merit of the *average* pixel. It is seeded physics (a
property of the sensor, like the transmission matrix), not privacy noise.
"""

from __future__ import annotations

import torch

from ..randomness.seeding import stream_seed


def dark_signal_map(
    seed: int, pixels: int, dsnu_rms: float, hot_pixel_fraction: float, hot_pixel_factor: float
) -> torch.Tensor | None:
    """Per-pixel dark-current multipliers ``(pixels,)`` with mean 1, or None for a uniform sensor."""
    if dsnu_rms == 0 and hot_pixel_fraction == 0:
        return None
    generator = torch.Generator().manual_seed(stream_seed(seed, "dark-map"))
    multiplier = torch.exp(dsnu_rms * torch.randn(pixels, generator=generator, dtype=torch.float64))
    hot = torch.rand(pixels, generator=generator, dtype=torch.float64) < hot_pixel_fraction
    multiplier[hot] *= hot_pixel_factor
    return (multiplier / multiplier.mean()).float()


def light_response_map(
    seed: int,
    pixels: int,
    prnu_rms: float,
    anchor_falloff: float,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Per-pixel photo-response multipliers (PRNU, mean 1, relative std ``prnu_rms``: seeded
    physics like the dark map) and the anchor beam's intensity profile over the pixels read
    (``1 - anchor_falloff u^2`` for ``u`` from -1 to 1 across them, normalised to mean 1); each
    None when flat."""
    prnu = None
    if prnu_rms > 0:
        generator = torch.Generator().manual_seed(stream_seed(seed, "prnu"))
        prnu = (1 + prnu_rms * torch.randn(pixels, generator=generator, dtype=torch.float64)).clamp_(min=0.05)
        prnu = (prnu / prnu.mean()).float()
    profile = None
    if anchor_falloff > 0:
        u = torch.linspace(-1.0, 1.0, pixels, dtype=torch.float64)
        shape = 1 - anchor_falloff * u * u
        profile = (shape / shape.mean()).float()
    return prnu, profile
