"""Issue 36: the temperature law's intervals on hidden cameras, the EMVA 1288 quantities, the
extreme-pixel bounds under PRNU and an uneven anchor, the estimator's own plateau check, unity
gain from the measured interval, and the refusal of older calibration files."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import opu_hal
from opu_hal.calibration import ground_truth as gt
from opu_hal.calibration.frames import acquire
from opu_hal.calibration.photon_transfer import estimate
from opu_hal.calibration.run import assemble, calibrate_device
from opu_hal.calibration.schema import read_calibration, write_calibration
from opu_hal.contract.errors import CalibrationError

THERMAL_SEEDS = 10


def test_temperature_law_intervals_cover_hidden_laws_of_other_activation_energies():
    """Cameras with the Konnik-Welsh law and with fixed activations 0.6 / 0.75 eV, 10- and 12-bit,
    1 % hot pixels that clip when hot: the figure of merit (typical pixels) and the doubling
    temperature at 25 C within 5 %, their 95 % intervals covering the truth >= 90 % of the time (the
    free Arrhenius fit's covered 0/20 on a 10-bit camera; a 0.75 eV camera's FOM was 21 % off)."""
    covered = {"dark_fom_na_per_cm2": 0, "doubling_temperature_k": 0}
    for seed in range(THERMAL_SEEDS):
        truth = gt.draw_thermal_camera(seed)
        calibration = calibrate_device(
            opu_hal.load_device(truth.profile),
            gt.THERMAL_TEMPERATURES,
            (400.0,),
            gt.THERMAL_DARK_EXPOSURES,
            frames=8,
            bootstrap=200,
        )
        law = calibration.temperature_law
        for name in covered:
            estimate, value = getattr(law, name), truth.values[name]
            assert abs(estimate.value / value - 1) < 0.05, (seed, name, value, estimate)
            covered[name] += estimate.lower <= value <= estimate.upper
    assert all(count >= 0.9 * THERMAL_SEEDS for count in covered.values()), covered


@pytest.fixture(scope="module")
def uneven():
    """A camera with 3 % PRNU and an anchor 40 % dimmer at the ends than at the centre."""
    profile = opu_hal.validate_profile(
        {
            "backend": "simulated",
            "in_features": 8,
            "out_features": 512,
            "seed": 11,
            "adc_bits": 12,
            "black_level_dn": 64,
            "gain_e_per_dn": 1.0,
            "read_noise_e": 3.0,
            "full_well_e": 3000.0,
            "temperature_min_c": 20.0,
            "temperature_max_c": 40.0,
            "temperature_c": 20.0,
            "prnu_rms": 0.03,
            "anchor_falloff": 0.4,
            "exposure_us": 400.0,
            "anchor_power_uw": 0.7,
            "laser_power_uw": 0.7,
        }
    )
    device = opu_hal.load_device(profile)
    acq = acquire(device, [20.0, 40.0], [400.0], [100_000.0], 16)
    pt = estimate(acq, bootstrap=200)
    return device, acq, pt, assemble(device, acq, pt, [20.0, 40.0], [400.0], [100_000.0])


def test_emva_quantities_are_reported_with_at_least_50_levels_below_saturation(uneven):
    _, _acq, _pt, calibration = uneven
    assert calibration.illumination_levels >= 50
    assert calibration.linearity.levels >= 30  # 5-95 % of the saturation point (earlier under a 40 % falloff)
    assert abs(calibration.linearity.error_min_pct) < 1 and abs(calibration.linearity.error_max_pct) < 1
    assert calibration.uniformity.dsnu_e.value >= 0 and calibration.defect_pixels.threshold_mads == 6.0
    # the anchor's 40 % falloff is in the total nonuniformity; the high-pass PRNU sees the 3 % pixels only
    assert calibration.uniformity.prnu_pct.value > 10
    hp = calibration.uniformity.prnu_highpass_pct
    assert hp.lower <= 3.0 * 1.03 and hp.upper >= 3.0 * 0.97 and abs(hp.value / 3.0 - 1) < 0.15


def test_privacy_bounds_take_the_extreme_pixel_under_prnu_and_an_uneven_anchor(uneven):
    device, _, _, calibration = uneven
    point = calibration.point(20.0, 400.0)
    reads = device._anchor_reads_e().numpy()
    dark = device.sensor.dark_e
    assert point.anchor_read_e_min_pixel_lower <= reads.min()  # Skellam: the dimmest pixel's read
    assert point.anchor_e_min_pixel_lower <= reads.min() - dark * 0.9
    assert point.anchor_e_max_pixel_upper >= reads.max() - dark * 1.1  # Gaussian: the brightest pixel
    assert point.anchor_e.upper < reads.max()  # the pixel mean alone would have been optimistic
    assert calibration.uniformity.response_max_upper >= float(device._prnu.max())


def test_the_estimator_refuses_a_sweep_that_stops_short_of_the_plateau(uneven):
    _, acq, _, _ = uneven
    x = [s.mean.mean() for s in acq.ptc]
    rising = int(np.argmax(np.diff(x) < 1e-3 * x[-1]))  # the first level of the plateau
    short = dataclasses.replace(acq, ptc=acq.ptc[: rising - 2])
    with pytest.raises(CalibrationError, match="not a plateau"):
        estimate(short, bootstrap=20)


def test_an_8_bit_sweep_that_stops_at_the_adc_top_is_labelled_adc_limited():
    """Issue 36: mean 252 DN with most pixels at 255 is the ADC range, not the full well."""
    profile = opu_hal.validate_profile(
        {
            "backend": "simulated",
            "in_features": 8,
            "out_features": 256,
            "seed": 2,
            "adc_bits": 8,
            "black_level_dn": 10,
            "gain_e_per_dn": 20.0,
            "read_noise_e": 12.0,
            "full_well_e": 20000.0,
            "temperature_min_c": 20.0,
            "temperature_max_c": 40.0,
            "temperature_c": 20.0,
        }
    )
    device = opu_hal.load_device(profile)
    acq = acquire(device, [20.0], [400.0], [100_000.0], 8)
    pt = estimate(acq, bootstrap=50)
    assert pt.saturation_limited_by == "adc"
    true_clip = (255 - 10) * 20.0
    assert pt.saturation.lower <= true_clip <= pt.saturation.upper
    assert pt.saturation_point.value < pt.saturation.upper
    assert int(np.argmax([(s.var - acq.ptc_dark.var).mean() for s in acq.ptc])) >= 50  # EMVA: >= 50 levels below


def test_calibration_files_of_schema_version_1_are_refused_by_name(tmp_path, uneven):
    _, _, _, calibration = uneven
    path = write_calibration(calibration, tmp_path / "c.json")
    assert read_calibration(path) == calibration
    data = json.loads(path.read_text())
    data["schema_version"] = 1
    path.write_text(json.dumps(data))
    with pytest.raises(CalibrationError, match=r"'schema_version' is 1 \(written before issue 36.*re-run"):
        read_calibration(path)
