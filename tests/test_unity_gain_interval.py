"""The Skellam source's unity-gain check reads the calibration's gain INTERVAL: every gain in it must map
each electron count up to the full scale to the same number of DN (``n_max |1/g - 1| < 0.5``)."""

from __future__ import annotations

from pathlib import Path

import pytest

import opu_hal
from opu_hal.calibration.calibrated import load_calibrated_noise
from opu_hal.calibration.schema import Estimate, read_calibration
from opu_hal.contract.errors import CalibrationError

DATA = Path(__file__).parent / "data" / "plots"


def noise_with_gain(value: float, lower: float, upper: float):
    """The unity camera's real calibration (tests/data/plots) with its gain interval replaced."""
    calibration = read_calibration(DATA / "opu-unity-cal.json")
    gain = Estimate(value=value, lower=lower, upper=upper, level=0.95, method="test", unit="e-/DN")
    return load_calibrated_noise(
        calibration.model_copy(update={"gain_e_per_dn": gain}), opu_hal.load_profile(DATA / "opu-unity.toml")
    )


def test_a_camera_at_1_004_e_per_dn_calibrated_to_an_interval_around_one_is_refused():
    """The issue's camera: true gain 1.004, calibrated 0.998 [0.992, 1.005]; the interval holds 1, but
    a full-scale read (~3000 e-) may come out 24 DN off its electron count at the interval's end."""
    noise = noise_with_gain(0.998, 0.992, 1.005)
    with pytest.raises(CalibrationError, match=r"interval \[0\.992, 1\.005\] e-/DN.*not within.*digitized"):
        noise.check_unity_gain()


def test_the_tolerance_is_half_a_dn_at_the_upper_end_of_the_full_scale():
    noise = noise_with_gain(1.0, 1.0 - 1e-5, 1.0 + 1e-5)
    assert noise.unity_gain_tolerance() == pytest.approx(0.5 / noise.calibration.saturation_e.upper)


def test_an_interval_inside_the_tolerance_passes_and_one_end_outside_it_is_refused():
    full_scale = read_calibration(DATA / "opu-unity-cal.json").saturation_e.upper
    tol = 0.5 / full_scale
    noise_with_gain(1.0, 1 / (1 + 0.9 * tol), 1 / (1 - 0.9 * tol)).check_unity_gain()  # every gain within
    with pytest.raises(CalibrationError, match="not within"):
        noise_with_gain(1.0, 1 / (1 + 0.9 * tol), 1 / (1 - 1.5 * tol)).check_unity_gain()  # upper end outside
