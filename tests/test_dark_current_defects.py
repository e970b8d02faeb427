"""Dark current as EMVA 1288 (Release 4.0) reports it: the mean over all pixels (``mu_I.mean``, a
datasheet's figure) beside the typical pixels' mean (hot ones left out), with the defect statistics."""

from __future__ import annotations

import numpy as np
import pytest

import opu_hal
from opu_hal.calibration.ground_truth import typical_dark_multiplier
from opu_hal.calibration.run import calibrate_device
from opu_hal.camera.pixel_maps import dark_signal_map

HOT_FRACTION, HOT_FACTOR = 0.01, 50.0


def hot_camera():
    return opu_hal.validate_profile(
        {
            "backend": "simulated",
            "name": "hot-pixels",
            "in_features": 8,
            "out_features": 1024,
            "seed": 43,
            "adc_bits": 12,
            "black_level_dn": 64,
            "gain_e_per_dn": 2.0,
            "read_noise_e": 4.0,
            "full_well_e": 6000.0,
            "quantum_efficiency": 0.6,
            "dark_fom_na_per_cm2": 0.1,
            "temperature_min_c": 0.0,
            "temperature_max_c": 60.0,
            "dsnu_rms": 0.0,
            "hot_pixel_fraction": HOT_FRACTION,
            "hot_pixel_factor": HOT_FACTOR,
            "exposure_us": 400.0,
            "anchor_power_uw": 0.7,
            "laser_power_uw": 0.7,
        }
    )


@pytest.fixture(scope="module")
def calibrated():
    profile = hot_camera()
    calibration = calibrate_device(
        opu_hal.load_device(profile), [20.0, 40.0], [400.0], [100_000.0, 400_000.0], frames=4, bootstrap=100
    )
    return profile, calibration


def test_both_dark_current_figures_are_reported_and_differ_by_the_hidden_cameras_hot_pixel_share(calibrated):
    """1 % hot pixels at 50x: the typical pixels' mean sits (all-pixel mean / typical mean - 1) below the
    all-pixel mean, at every temperature, as the hidden dark map says."""
    profile, calibration = calibrated
    dark_map = dark_signal_map(profile.seed, profile.out_features, 0.0, HOT_FRACTION, HOT_FACTOR).double().numpy()
    truth = typical_dark_multiplier(profile) / float(dark_map.mean())  # typical over all-pixel mean
    assert truth < 0.7  # the hot pixels carry a third of the all-pixel mean
    for point in calibration.dark_current:
        every = point.rate_all_pixels_e_per_s
        assert every is not None
        assert point.rate_e_per_s.value / every.value == pytest.approx(truth, rel=0.03), point.temperature_c


def test_the_defect_statistics_count_the_hidden_hot_pixels_and_state_the_threshold(calibrated):
    profile, calibration = calibrated
    dark_map = dark_signal_map(profile.seed, profile.out_features, 0.0, HOT_FRACTION, HOT_FACTOR).double().numpy()
    hidden = int((dark_map > 10).sum())
    for point in calibration.dark_current:
        assert point.hot_pixels == hidden
        assert point.hot_threshold_mads == 10.0
        assert point.rate_e_per_s.value < point.hot_threshold_e_per_s < HOT_FACTOR * point.rate_e_per_s.value
    assert np.isclose(hidden / profile.out_features, HOT_FRACTION, rtol=0.5)
