"""Unity gain is proven or refused by the calibration itself: the gain's whole interval must map every
count up to full scale to itself (``n_max |1/g - 1| < 0.5``); an interval that merely holds 1 e-/DN does not."""

from __future__ import annotations

import pytest

import opu_hal
from opu_hal.calibration.calibrated import load_calibrated_noise
from opu_hal.calibration.run import calibrate_device
from opu_hal.contract.errors import CalibrationError


def hidden_camera(gain: float):
    """A small flat-beam camera near 1 e-/DN (its true gain hidden from the calibration)."""
    keys = {
        "backend": "simulated",
        "in_features": 8,
        "out_features": 512,
        "seed": 7,
        "adc_bits": 12,
        "black_level_dn": 64,
        "gain_e_per_dn": gain,
        "read_noise_e": 3.0,
        "full_well_e": 3000.0,
        "temperature_min_c": 20.0,
        "temperature_max_c": 30.0,
        "exposure_us": 100_000.0,
        "laser_power_uw": 0.0055,
        "anchor_power_uw": 0.0055,
        "privacy_anchor": "reference-beam",
    }
    return opu_hal.validate_profile(keys)


@pytest.fixture(scope="module", params=[1.004, 1.0])
def calibrated(request):
    profile = hidden_camera(request.param)
    device = opu_hal.load_device(profile)
    calibration = calibrate_device(device, [25.0], [100_000.0], [1_000_000.0], frames=8, bootstrap=50)
    return request.param, profile, load_calibrated_noise(calibration, profile)


def test_a_camera_near_unity_gain_is_refused_as_unity_by_its_own_calibration(calibrated):
    """Both 1.004 and exactly 1 e-/DN calibrate to intervals about 1 % wide: neither proves unity, and
    the refusal names the interval, the error in DN and the digitized mechanism."""
    true_gain, _, noise = calibrated
    gain = noise.calibration.gain_e_per_dn
    assert gain.lower <= true_gain <= gain.upper  # the interval covers the truth, and is not a proof
    assert not noise.proves_unity_gain()
    assert noise.unity_gain_error_dn() > 0.5
    with pytest.raises(CalibrationError, match=r"does not prove unity gain.*DN off.*digitized mechanism"):
        noise.check_unity_gain()


def test_an_unproven_unity_calibration_routes_the_device_to_the_digitized_mechanism(calibrated):
    """Without the calibration the declared 1 e-/DN camera is a Skellam source; with it, digitized only."""
    true_gain, profile, noise = calibrated
    device = opu_hal.load_device(profile)
    assert device.capabilities.privacy_noise == (true_gain == 1.0)  # the profile's truth check alone
    device.attach_calibration(noise)
    assert not device.capabilities.privacy_noise and device.capabilities.digitized_noise
    with pytest.raises(CalibrationError, match="does not prove unity gain"):
        device.draw_privacy_counts(10, 100.0)
    law = device.digitized_read_law()
    assert (law.gain_e_per_dn, law.high("gain_e_per_dn")) == (
        noise.calibration.gain_e_per_dn.lower,
        noise.calibration.gain_e_per_dn.upper,
    )


def test_an_interval_narrow_enough_for_the_saturation_proves_unity(calibrated):
    _, profile, noise = calibrated
    full = noise.calibration.saturation_e.upper
    half_width = 0.4 / full  # n_max |1/g - 1| just under 0.4 DN at either end
    gain = noise.calibration.gain_e_per_dn.model_copy(
        update={"value": 1.0, "lower": 1 - half_width, "upper": 1 + half_width}
    )
    narrowed = load_calibrated_noise(noise.calibration.model_copy(update={"gain_e_per_dn": gain}), profile)
    assert narrowed.proves_unity_gain() and narrowed.unity_gain_error_dn() < 0.5
    narrowed.check_unity_gain()
