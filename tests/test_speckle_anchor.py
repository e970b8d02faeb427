"""Speckle privacy anchor: the simulator's physics, the per-pixel bound map that calibration measures,
pixel selection, counts drawn at each pixel's own mean, and the drift watch."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import opu_hal
from opu_hal.calibration.anchor_map import anchor_map_path, bounds_from_frames, calibrate_anchor_map, load_anchor_map
from opu_hal.calibration.anchor_upper import pooled_read_variance_dn2
from opu_hal.calibration.calibrated import CalibratedNoise
from opu_hal.calibration.run import calibrate_device
from opu_hal.calibration.schema import write_calibration
from opu_hal.camera.datasheet import CMV2000
from opu_hal.contract.anchor_map import AnchorBoundMap, drift_test, select_pixels
from opu_hal.contract.errors import AnchorDrift
from opu_hal.profiles.catalogue import load_profile, validate_profile
from opu_hal.randomness.secure_random import SecureGenerator

PIXELS = 20_000
SMALL = {
    "backend": "simulated",
    "in_features": 10,
    "out_features": 64,
    "gain_e_per_dn": 1.0,
    "adc_bits": 12,
    "black_level_dn": 64,
    "sensor_pixels": PIXELS,
    "anchor_power_uw": 0.045,  # ~1300 e- per pixel on 20 000 pixels
    "prnu_rms": 0.01,
    "dead_pixel_fraction": 0.002,
    "dim_pixel_fraction": 0.01,
    "anchor_check_every": 2,
}
BLACK = (63.9, 64.1)  # a calibration's black-level interval (DN)
GAIN = (0.999, 1.001)  # and its gain interval (e-/DN)


def small_device(**changes):
    return opu_hal.load_device(validate_profile({**SMALL, **changes}, "speckle.toml"))


def measured_map(device, frames: int = 32) -> AnchorBoundMap:
    read_var = pooled_read_variance_dn2(device.sensor.read_noise_e, GAIN[0])
    frames_dn = device.anchor_frames(frames)
    return bounds_from_frames(frames_dn, device.sensor.max_dn, BLACK, GAIN, 0.01, "test frames", read_var_dn2=read_var)


def draw(device, bounds: AnchorBoundMap, n_values: int, poisson_mean: float):
    return device.speckle.draw(
        SecureGenerator(),
        device.sensor,
        bounds,
        device.anchor_means_e(),
        n_values,
        poisson_mean,
        1e-3,
        device._camera_generator,
    )


def test_speckle_anchor_is_exponentially_distributed_over_the_pixels():
    device = small_device(prnu_rms=0.0, dead_pixel_fraction=0.0, dim_pixel_fraction=0.0)
    light = device.anchor_means_e() - device.sensor.dark_e
    relative = light / light.mean()
    assert relative.std() == pytest.approx(1.0, abs=0.05)
    assert float((relative < 0.1).mean()) == pytest.approx(1 - np.exp(-0.1), abs=0.01)


def test_dead_and_dim_pixels_sit_near_the_dark_signal():
    device = small_device(dead_pixel_fraction=0.05)
    means = device.anchor_means_e()
    assert float((means <= device.sensor.dark_e * 10).mean()) >= 0.05


def test_the_default_profile_anchor_is_speckle_and_a_flat_beam_only_where_declared():
    assert load_profile("opu-sim-dp").privacy_anchor == "speckle"
    assert load_profile("opu-sim-8bit").privacy_anchor == "reference-beam"
    law = small_device().digitized_read_law()  # speckle: per bin of kept pixels (test_speckle_digitized.py)
    assert law.kept_pixels is not None and law.mean_bins


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_measured_bound_map_covers_the_hidden_truth_at_every_pixel(seed):
    device = small_device(seed=seed)
    bounds = measured_map(device)
    truth = device.anchor_means_e()
    assert np.all(bounds.lower_e <= truth)
    assert np.all(truth <= bounds.upper_e)
    assert float(np.median(bounds.lower_e / np.maximum(truth, 1e-9))) > 0.9  # and is not vacuous


def test_kept_pixels_reach_the_mean_and_stay_below_the_clip_ceiling():
    device = small_device()
    bounds = measured_map(device)
    chosen = select_pixels(bounds, 1300.0, 2900.0)
    assert chosen.reads_per_count * bounds.lower_e[chosen.kept].min() >= 1300.0
    assert bounds.upper_e[chosen.kept].max() <= 2900.0
    assert chosen.planned_mean <= 1.3 * 1300.0 * 1.001


def test_accounted_noise_never_exceeds_the_applied_at_any_kept_pixel():
    device = small_device()
    bounds = measured_map(device)
    counts = draw(device, bounds, 50_000, 1300.0)
    chosen = device.speckle.selection(bounds, 1300.0, 2899.4)
    truth = device.anchor_means_e()
    assert np.all(truth[chosen.kept] >= bounds.lower_e[chosen.kept])
    lam = chosen.count_means(truth, 50_000)
    assert lam.min() >= counts.distribution.poisson_mean_lower
    assert counts.distribution.kept_pixels == chosen.kept_pixels
    assert counts.distribution.frames == chosen.frames(50_000)


def test_counts_are_drawn_at_their_own_pixels_means():
    device = small_device(anchor_check_every=1000)
    bounds = measured_map(device)
    n = 200_000
    counts = draw(device, bounds, n, 1300.0)
    chosen = device.speckle.selection(bounds, 1300.0, 2899.4)
    lam = chosen.count_means(device.anchor_means_e(), n)
    values = counts.counts.double().numpy()
    expected = 2 * lam.mean() + 2 * chosen.reads_per_count * (6.0**2 + 1 / 12)
    assert values.var() == pytest.approx(expected, rel=0.03)
    assert abs(values.mean()) < 5 * np.sqrt(expected / n)  # the two counts read the same pixels: no bias


def test_an_inflated_bound_map_is_caught_by_the_statistical_check():
    device = small_device()
    honest = measured_map(device)
    inflated = dataclasses.replace(honest, lower_e=honest.lower_e * 1.1, source="inflated")
    with pytest.raises(AnchorDrift, match="below its calibrated bounds"):
        draw(device, inflated, 1000, 1300.0)


def test_the_drift_test_passes_a_faithful_anchor():
    rng = np.random.default_rng(5)
    means = rng.exponential(1300.0, 50_000) + 500
    checks = [drift_test(rng.poisson(means) + rng.normal(0, 6, means.size), means, 6.0, i) for i in range(20)]
    assert all(check.passed for check in checks)


def test_a_drop_of_anchor_power_mid_run_stops_the_run_at_the_next_check_and_says_which_checks_were_made():
    device = small_device(anchor_check_every=2)
    bounds = measured_map(device)
    for _ in range(4):  # draws 0 to 3: the checks at 0 and 2 pass
        made = draw(device, bounds, 1000, 1300.0)
    assert made.distribution.anchor_checks == 2
    assert made.distribution.anchor_check_every == 2
    device.speckle.anchor.power_factor = 0.9  # the anchor laser loses 10 %
    with pytest.raises(AnchorDrift, match="checks made: 3, one every 2 draws"):
        draw(device, bounds, 1000, 1300.0)
    assert device.speckle.draws == 4  # the stopped draw drew nothing
    again = draw(device, measured_map(device), 1000, 1300.0)  # recalibrated: the run resumes
    assert again.distribution.poisson_mean_lower >= 1300.0


def test_the_frame_time_comes_from_the_cited_datasheet():
    assert load_profile("opu-sim-dp").frame_period_us == pytest.approx(1e6 / 70)
    assert small_device(adc_bits=10).profile.frame_period_us == pytest.approx(1e6 / 340)
    assert CMV2000.pixels == 2048 * 1088
    with pytest.raises(ValueError, match="frame_time_us"):
        validate_profile({**SMALL, "adc_bits": 14, "black_level_dn": 64}, "speckle.toml")


def test_plan_prints_the_kept_pixels_the_reads_per_count_and_the_camera_seconds(tmp_path, capsys, monkeypatch):
    from opu_hal.calibration import plan_command
    from opu_hal.cli import main

    monkeypatch.setattr(
        plan_command, "required_poisson_mean", lambda *args: 1300.0
    )  # the accountant is tested elsewhere

    profile = tmp_path / "speckle.toml"
    lines = [f"{key} = {json.dumps(value)}" for key, value in {**SMALL, "schema": 1}.items()]
    profile.write_text("\n".join(lines) + "\n")
    cal = tmp_path / "cal.json"
    device = opu_hal.load_device(str(profile))
    calibration = calibrate_device(device, [25.0], [400.0], [100_000.0], frames=16, bootstrap=100)
    full = calibration.saturation_e.upper  # a gain interval narrow enough to prove unity (the Skellam route's rule)
    gain = calibration.gain_e_per_dn.model_copy(update={"value": 1.0, "lower": 1 - 0.4 / full, "upper": 1 + 0.4 / full})
    calibration = calibration.model_copy(update={"gain_e_per_dn": gain})
    write_calibration(calibration, cal)
    assert "anchor map" in calibrate_anchor_map(device, calibration, cal, frames=16)
    assert (tmp_path / "cal.anchor-map.npz").exists()
    shape = ["--sampling", "fixed", "--dataset-size", "54000", "--batch-size", "2048", "--steps", "10"]
    capsys.readouterr()
    main(
        ["plan", "--profile", str(profile), "--calibration", str(cal), "--mechanism", "skellam", *shape]
        + ["--target-epsilon", "4", "--dimension", "100000", "--lattice-resolution", "23"]
    )
    out = capsys.readouterr().out
    model = CalibratedNoise(calibration, cal, "linear", 400.0, device.profile.laser_power_uw, SMALL["anchor_power_uw"])
    chosen = select_pixels(load_anchor_map(anchor_map_path(cal), 25.0, 400.0), 1300.0, model.clip_ceiling_e())
    assert f"{chosen.kept_pixels} kept pixels" in out and f"{chosen.frames(100_000)} frame(s) per step" in out
    assert "kept pixels" in out and "read(s) per count" in out and "camera seconds for the run" in out
