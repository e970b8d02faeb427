"""Ground truth on the simulator: random hidden camera parameters, calibrate, compare.

Used by the recovery test and ``python -m benchmarks.calibration``. The drawn ranges keep every
parameter identifiable: read noise >= 1.2 DN (so ADC rounding follows Sheppard's correction), a
12-bit ADC whose top lies above the full well (else the full well is hidden behind the ADC range).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..backends.simulated.profile import SimulatedProfile
from ..profiles.catalogue import validate_profile

PARAMETERS = ("gain_e_per_dn", "read_noise_e", "dark_fom_na_per_cm2", "quantum_efficiency", "full_well_e")
TEMPERATURES = (0.0, 20.0, 40.0, 60.0, 80.0)
EXPOSURES = (400.0,)
DARK_EXPOSURES = (100_000.0, 1_000_000.0)


@dataclass(frozen=True)
class Truth:
    profile: SimulatedProfile
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
    profile = validate_profile({
        "backend": "simulated", "name": f"ground-truth-{seed}", "in_features": 10, "out_features": pixels,
        "seed": seed, "adc_bits": 12, "black_level_dn": 100, "temperature_min_c": 0.0,
        "temperature_max_c": 80.0, "dsnu_rms": 0.2, "hot_pixel_fraction": 0.002, "hot_pixel_factor": 20.0,
        **values,
    })
    values["dark_fom_na_per_cm2"] *= typical_dark_multiplier(profile)  # the law's pixels: hot ones left out
    return Truth(profile=profile, values=values)


def typical_dark_multiplier(profile) -> float:
    """Mean dark-current multiplier of the pixels that are not hot (the law describes those): the
    true dark map with the estimator's own rule (photon_transfer.hot_pixel_mask) applied to it."""
    from ..backends.simulated.dark_map import dark_signal_map
    from .photon_transfer import HOT_PIXEL_MADS

    dark_map = dark_signal_map(profile.seed, profile.out_features, profile.dsnu_rms,
                               profile.hot_pixel_fraction, profile.hot_pixel_factor)
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
