"""Ground truth on the simulator: random hidden camera parameters, calibrate, compare.

Used by the recovery test and ``python -m benchmarks.calibration``. The drawn ranges keep every
parameter identifiable: read noise >= 1.2 DN (so ADC rounding follows Sheppard's correction), a
12-bit ADC whose top lies above the full well (else the full well is hidden behind the ADC range).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..camera.pixel_maps import dark_signal_map
from ..contract.profile_base import BaseProfile
from ..profiles.catalogue import validate_profile

PARAMETERS = ("gain_e_per_dn", "read_noise_e", "dark_fom_na_per_cm2", "quantum_efficiency", "full_well_e")
TEMPERATURES = (0.0, 20.0, 40.0, 60.0, 80.0)
EXPOSURES = (400.0,)
DARK_EXPOSURES = (100_000.0, 1_000_000.0)


@dataclass(frozen=True)
class Truth:
    profile: BaseProfile  # a simulated profile (backend = "simulated"): the hidden camera
    values: dict[str, float]


def draw_camera(seed: int, pixels: int = 1024) -> Truth:
    """A simulated profile whose hidden camera parameters are drawn at random from ``seed``."""
    rng = np.random.default_rng([seed, 1288])
    gain = float(rng.uniform(2.0, 4.0))
    read = float(rng.uniform(max(4.0, 1.2 * gain), 15.0))
    adc_top = (4095 - 100) * gain
    values = {
        "gain_e_per_dn": gain,
        "read_noise_e": read,
        "dark_fom_na_per_cm2": float(math.exp(rng.uniform(math.log(0.02), math.log(0.2)))),
        "quantum_efficiency": float(rng.uniform(0.3, 0.9)),
        "full_well_e": float(rng.uniform(4000.0, min(15000.0, 0.85 * adc_top))),
    }
    profile = validate_profile(
        {
            "backend": "simulated",
            "name": f"ground-truth-{seed}",
            "in_features": 10,
            "out_features": pixels,
            "seed": seed,
            "adc_bits": 12,
            "black_level_dn": 100,
            "temperature_min_c": 0.0,
            "temperature_max_c": 80.0,
            "dsnu_rms": 0.2,
            "hot_pixel_fraction": 0.002,
            "hot_pixel_factor": 20.0,
            **values,
        }
    )
    values["dark_fom_na_per_cm2"] *= typical_dark_multiplier(profile)  # the law's pixels: hot ones left out
    return Truth(profile=profile, values=values)


def typical_dark_multiplier(profile) -> float:
    """Mean dark-current multiplier of the pixels that are not hot (the law describes those): the
    true dark map with the estimator's own rule (dark_lines.hot_pixel_mask) applied to it."""
    from .dark_lines import HOT_PIXEL_MADS

    dark_map = dark_signal_map(
        profile.seed, profile.out_features, profile.dsnu_rms, profile.hot_pixel_fraction, profile.hot_pixel_factor
    )
    if dark_map is None:
        return 1.0
    m = dark_map.double().numpy()
    median = np.median(m)
    return float(m[m <= median + HOT_PIXEL_MADS * 1.4826 * np.median(np.abs(m - median))].mean())


def recovered(calibration) -> dict[str, object]:
    """The calibration's estimates of :data:`PARAMETERS` (Estimate objects)."""
    return {
        "gain_e_per_dn": calibration.gain_e_per_dn,
        "read_noise_e": calibration.read_noise_e,
        "dark_fom_na_per_cm2": calibration.temperature_law.dark_fom_na_per_cm2,
        "quantum_efficiency": calibration.quantum_efficiency,
        "full_well_e": calibration.saturation_e,
    }


ACTIVATIONS = (None, 0.6, 0.75)  # Konnik-Welsh (half the Varshni gap), and two fixed activation energies


def draw_thermal_camera(seed: int, pixels: int = 256, frames_bits: tuple[int, ...] = (10, 12)) -> Truth:
    """A hidden camera for the temperature law: activation energy among :data:`ACTIVATIONS`, a 10-
    or 12-bit ADC, DSNU and 1 % hot pixels 20x as dark (some clip at long, hot exposures).
    ``values``: the typical pixels' figure of merit and the doubling temperature at 25 C."""
    from ..camera.physics import doubling_temperature_k

    rng = np.random.default_rng([seed, 36])
    bits = int(rng.choice(frames_bits))
    activation = ACTIVATIONS[int(rng.integers(len(ACTIVATIONS)))]
    gain = float(rng.uniform(1.0, 3.0)) if bits == 12 else float(rng.uniform(0.4, 1.0))
    fom = float(math.exp(rng.uniform(math.log(0.03), math.log(0.2))))
    top = (2**bits - 1 - 64) * gain
    profile = validate_profile(
        {
            "backend": "simulated",
            "name": f"thermal-{seed}",
            "in_features": 8,
            "out_features": pixels,
            "seed": seed,
            "adc_bits": bits,
            "black_level_dn": 64,
            "gain_e_per_dn": gain,
            "read_noise_e": float(rng.uniform(2.0, 6.0)),
            "full_well_e": float(0.8 * top),
            "quantum_efficiency": float(rng.uniform(0.3, 0.9)),
            "dark_fom_na_per_cm2": fom,
            "dark_activation_ev": activation,
            "temperature_min_c": 0.0,
            "temperature_max_c": 85.0,
            "dsnu_rms": 0.2,
            "hot_pixel_fraction": 0.01,
            "hot_pixel_factor": 20.0,
            "exposure_us": 400.0,
            "anchor_power_uw": 0.7,
            "laser_power_uw": 0.7,
        }
    )
    pitch = getattr(profile, "pixel_pitch_um", None)  # the simulated backend's profile (no backend import here)
    if not isinstance(pitch, float):
        raise TypeError(f"draw_thermal_camera built a {type(profile).__name__} without a pixel pitch")
    area = (pitch * 1e-4) ** 2
    values = {
        "dark_fom_na_per_cm2": fom * typical_dark_multiplier(profile),
        "doubling_temperature_k": doubling_temperature_k(25.0, area, fom, activation),
    }
    return Truth(profile=profile, values=values)


THERMAL_TEMPERATURES = (0.0, 20.0, 40.0, 60.0, 85.0)
THERMAL_DARK_EXPOSURES = (100_000.0, 1_000_000.0)
