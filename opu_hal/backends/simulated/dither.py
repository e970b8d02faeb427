"""Which pixels a linear projection may read: those where the camera's rounding is dithered.

The ADC rounds each frame's electrons to steps of ``g`` e-/DN. The noise report counts that rounding as
independent noise of variance ``g^2 / 12``, which holds only where the frame's own random noise spans
the step. In linear mode the quietest frame at pixel ``j`` is the anchor-only frame, ``A^2 s_j``
electrons (``s_j`` the speckle reference's intensity over its mean, :mod:`.reference`), whose random
noise is ``sqrt(A^2 s_j + D + sigma_r^2)`` (shot, dark ``D`` at the coldest temperature the profile
allows, read). A pixel is dithered when that is at least :data:`MIN_DITHER_DN` steps, i.e. when

    s_j >= s_min = ((MIN_DITHER_DN g)^2 - D - sigma_r^2) / A^2.

A profile without ``reference_band`` reads the pixels with ``s_j >= s_min`` (every pixel where
``s_min <= 0``, e.g. a camera at 1 e-/DN); a declared band must lie above ``s_min``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ...camera.physics import SensorPhysics
from ...contract.errors import ProfileError
from .camera import profile_sensor
from .photons import electrons_per_pixel

if TYPE_CHECKING:
    from .profile import SimulatedProfile

MIN_DITHER_DN = 0.5  # a frame's random noise, in ADC steps, below which rounding is not dithered
WIDEST_BAND_HIGH = 50.0  # s_j above 50 has probability e^-50: every pixel
MAX_DITHERED_LOW = 9.0  # P(s_j >= 9) = 1.2e-4: a band starting higher keeps too few pixels to build


def coldest_sensor(profile: SimulatedProfile) -> SensorPhysics:
    """The profile's camera at ``temperature_min_c`` (the least dark signal) and its own exposure."""
    return profile_sensor(profile, profile.temperature_min_c, profile.exposure_us)


def frame_noise_e(profile: SimulatedProfile, light_e: float) -> float:
    """Random noise [e-] of a frame of ``light_e`` electrons at the coldest allowed temperature."""
    sensor = coldest_sensor(profile)
    return math.sqrt(max(light_e, 0.0) + sensor.dark_e + sensor.read_noise_e**2)


def dithered_low(profile: SimulatedProfile) -> float:
    """``s_min`` of the module docstring (0 when every reference intensity is dithered)."""
    sensor = coldest_sensor(profile)
    anchor_e = electrons_per_pixel(profile.anchor_power_uw, profile, profile.exposure_us)
    needed = (MIN_DITHER_DN * profile.gain_e_per_dn) ** 2 - sensor.dark_e - sensor.read_noise_e**2
    return max(0.0, needed / anchor_e) if anchor_e > 0 else (0.0 if needed <= 0 else math.inf)


def profile_band(profile: SimulatedProfile) -> tuple[float, float] | None:
    """The reference band a speckle projection reads: the profile's ``reference_band``, or the dithered
    pixels ``[s_min, 50]`` (None, every pixel, when ``s_min`` is 0)."""
    band = profile.reference_band
    if band is not None:
        return (band[0], band[1])
    if profile.mode != "linear" or profile.reference_field != "speckle":
        return None
    low = dithered_low(profile)
    return None if low == 0 else (low, WIDEST_BAND_HIGH)


def check_dithered(profile: SimulatedProfile, anchor_e: float, signal_e: float) -> None:
    """Refuse a gain whose ADC step dwarfs a frame's random noise: rounding is then deterministic, every
    value may be the same constant, and the Gaussian noise report (which counts rounding as uniform
    noise) would be false. The quietest frame of a projection, at the coldest temperature the profile
    allows, needs :data:`MIN_DITHER_DN` of random noise: in linear mode the anchor-only frame at the
    dimmest reference pixel read (a declared band's low end; the beam itself when flat; without a band
    only the dithered pixels are read, refused when too few are), in intensity mode a half-lit frame."""
    band, derived = profile_band(profile), profile.reference_band is None
    if profile.mode == "linear" and profile.reference_field == "speckle":
        frame, light_e = "the dimmest reference pixel's anchor-only", anchor_e * (0.0 if band is None else band[0])
    elif profile.mode == "linear":
        frame, light_e = "an anchor-only", anchor_e
    else:
        frame, light_e = "a half-lit", signal_e / 2
    step_e = MIN_DITHER_DN * profile.gain_e_per_dn
    too_few = derived and band is not None and band[0] > MAX_DITHERED_LOW
    std_e = frame_noise_e(profile, anchor_e * MAX_DITHERED_LOW if too_few else light_e)
    if not too_few and (std_e >= step_e * (1 - 1e-9) or (derived and band is not None)):
        return
    suggested = frame_noise_e(profile, anchor_e) if too_few else std_e  # too few: dither the mean reference
    raise ProfileError(
        f"profile {profile.label!r}: key 'gain_e_per_dn' = {profile.gain_e_per_dn:g} quantizes the signal away: "
        f"at {profile.temperature_min_c:g} C (temperature_min_c) "
        + (f"an anchor-only frame at {MAX_DITHERED_LOW:g} x the mean reference" if too_few else f"{frame} frame")
        + f"'s random noise is {std_e:.3g} e- = {std_e / profile.gain_e_per_dn:.3g} DN, below {MIN_DITHER_DN:g} DN; "
        f"use gain_e_per_dn <= {suggested / MIN_DITHER_DN:.4g} (or more light: anchor_power_uw, laser_power_uw, "
        "exposure_us; or a reference_band whose low end leaves the dimmest pixel read more anchor light)"
    )
