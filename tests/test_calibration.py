"""Calibration: photon transfer recovers a simulated camera; the file; the device; the plan."""

from __future__ import annotations

import json
import math

import pytest
import torch
from scipy import stats

import opu_hal
from opu_hal.calibration import ground_truth as gt
from opu_hal.calibration.plan import plan_gaussian, plan_skellam, what_would
from opu_hal.calibration.run import calibrate_device
from opu_hal.calibration.schema import MAX_FILE_BYTES, read_calibration, write_calibration
from opu_hal.cli import main
from opu_hal.contract.errors import CalibrationError, InputError
from opu_hal.privacy.run_shape import RunShape

SEEDS = 50


def small_profile(**overrides):
    keys = {
        "backend": "simulated",
        "in_features": 8,
        "out_features": 512,
        "seed": 5,
        "adc_bits": 12,
        "black_level_dn": 100,
        "gain_e_per_dn": 3.0,
        "read_noise_e": 8.0,
        "full_well_e": 9000.0,
        "temperature_min_c": 0.0,
        "temperature_max_c": 80.0,
        "dsnu_rms": 0.2,
        "hot_pixel_fraction": 0.01,
        "exposure_us": 100_000.0,
        "laser_power_uw": 0.0055,
        "anchor_power_uw": 0.0055,
        "privacy_anchor": "reference-beam",  # the flat-beam calibration path (speckle: test_speckle_anchor.py)
    }
    keys.update(overrides)
    return opu_hal.validate_profile(keys)


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """A small simulated device, its calibration file, and a profile that names it."""
    folder = tmp_path_factory.mktemp("cal")
    device = opu_hal.load_device(small_profile())
    calibration = calibrate_device(device, [0.0, 40.0, 80.0], [100_000.0], [1_000_000.0], frames=16, bootstrap=200)
    write_calibration(calibration, folder / "cal.json")
    lines = [f"{k} = {json.dumps(v)}" for k, v in small_profile().model_dump().items() if v is not None]
    (folder / "opu.toml").write_text("\n".join(lines + ['calibration = "cal.json"']) + "\n")
    return folder, calibration


def as_if_unity_measured(calibration):
    """``calibration`` with its gain interval narrowed to 1 +- 1e-5 e-/DN (an 8-frame sweep's interval is
    about 1 %): the planner's arithmetic at a unit-gain camera is what these tests exercise."""
    gain = calibration.gain_e_per_dn.model_copy(update={"value": 1.0, "lower": 1 - 1e-5, "upper": 1 + 1e-5})
    return calibration.model_copy(update={"gain_e_per_dn": gain})


@pytest.fixture(scope="module")
def unity_calibrated(tmp_path_factory):
    """The small device at 1 e-/DN (what the Skellam source needs), calibrated, and its profile."""
    folder = tmp_path_factory.mktemp("unity")
    device = opu_hal.load_device(small_profile(gain_e_per_dn=1.0, full_well_e=3000.0))
    calibration = as_if_unity_measured(
        calibrate_device(device, [0.0, 40.0, 80.0], [100_000.0], [1_000_000.0], frames=8, bootstrap=100)
    )
    write_calibration(calibration, folder / "cal.json")
    lines = [
        f"{k} = {json.dumps(v)}"
        for k, v in small_profile(gain_e_per_dn=1.0, full_well_e=3000.0).model_dump().items()
        if v is not None
    ]
    (folder / "opu.toml").write_text("\n".join(lines + ['calibration = "cal.json"']) + "\n")
    return folder, calibration


# -- ground truth --------------------------------------------------------------------------------
def test_calibration_recovers_random_hidden_camera_parameters_within_5_percent_with_covering_intervals():
    """50 random cameras (gain, read noise, dark FOM, QE, full well), default frame count:
    every estimate within 5 %, every 95 % interval covering the truth in >= 90 % of seeds."""
    covered = {name: 0 for name in gt.PARAMETERS}
    for seed in range(SEEDS):
        truth = gt.draw_camera(seed)
        device = opu_hal.load_device(truth.profile)
        calibration = calibrate_device(device, gt.TEMPERATURES, gt.EXPOSURES, gt.DARK_EXPOSURES, bootstrap=200)
        assert calibration.saturation_limited_by == "full_well"
        for name, estimate in gt.recovered(calibration).items():
            value = truth.values[name]
            assert abs(estimate.value / value - 1) < 0.05, (seed, name, value, estimate)
            covered[name] += estimate.lower <= value <= estimate.upper
    assert all(count >= 0.9 * SEEDS for count in covered.values()), covered


def test_hot_pixels_are_found_and_worst_pixel_bounds_stay_below_every_pixel(calibrated):
    _, calibration = calibrated
    device = opu_hal.load_device(small_profile())
    hot = int((device.sensor.dark_map > 5).sum())
    assert calibration.dark_current[0].hot_pixels == hot > 0
    for op in calibration.operating_points:
        device.set_options(temperature_c=op.temperature_c)
        sensor = device.sensor
        true_dark = (sensor.dark_e * sensor.dark_map * op.exposure_us / sensor.exposure_us).min().item()
        assert op.dark_e_min_pixel_lower <= true_dark
        assert op.anchor_read_e_min_pixel_lower <= device.anchor_e + true_dark


def test_dark_map_is_seeded_with_mean_one():
    a = opu_hal.load_device(small_profile()).sensor.dark_map
    b = opu_hal.load_device(small_profile()).sensor.dark_map
    c = opu_hal.load_device(small_profile(seed=6)).sensor.dark_map
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert a.mean().item() == pytest.approx(1.0, rel=1e-5)


# -- the file ------------------------------------------------------------------------------------
def test_calibration_file_round_trips(calibrated):
    folder, calibration = calibrated
    assert read_calibration(folder / "cal.json") == calibration


@pytest.mark.parametrize(
    "text, match",
    [
        ("{not json", "malformed JSON"),
        ("[1, 2]", "a JSON object"),
        ('{"schema_version": 99}', "key 'schema_version' is 99"),
    ],
)
def test_malformed_calibration_files_name_the_file_and_the_problem(tmp_path, text, match):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(CalibrationError, match=match) as info:
        read_calibration(path)
    assert str(path) in str(info.value)


def test_a_wrong_key_is_named(tmp_path, calibrated):
    folder, _ = calibrated
    data = json.loads((folder / "cal.json").read_text())
    data["gain_e_per_dn"]["lower"] = "low"
    (tmp_path / "cal.json").write_text(json.dumps(data))
    with pytest.raises(CalibrationError, match=r"key 'gain_e_per_dn.lower'"):
        read_calibration(tmp_path / "cal.json")


def test_oversized_calibration_file_is_refused_without_reading_it(tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(b" " * (MAX_FILE_BYTES + 1))
    with pytest.raises(CalibrationError, match="byte limit"):
        read_calibration(path)


# -- the device ----------------------------------------------------------------------------------
def test_profile_with_calibration_reports_calibrated_noise_that_bounds_every_coordinate(calibrated):
    folder, _ = calibrated
    device = opu_hal.load_device(folder / "opu.toml")
    device.set_options(temperature_c=40.0)
    report = device.noise_report()
    assert report.source == "calibrated" and 0 < report.std_lower <= report.std
    declared = opu_hal.load_device(small_profile())
    declared.set_options(temperature_c=40.0)
    assert report.std == pytest.approx(declared.noise_report().std, rel=0.05)
    x = (torch.rand(1, 8, generator=torch.Generator().manual_seed(1)) < 0.5).float()
    values = device.project(x.expand(300, -1).clone()).values
    assert device.project(x).noise.source == "calibrated"
    low = report.std_lower**2 * stats.chi2.ppf(1e-6, 299) / 299
    assert values.var(dim=0).min().item() >= low


def test_between_calibrated_temperatures_the_bound_uses_the_colder_measurement(calibrated):
    folder, _ = calibrated
    device = opu_hal.load_device(folder / "opu.toml")
    device.set_options(temperature_c=60.0)
    assert device.noise_report().details["calibrated_at_c"] == 40.0


def test_operating_points_outside_the_calibration_are_refused(calibrated):
    folder, _ = calibrated
    device = opu_hal.load_device(folder / "opu.toml")
    with pytest.raises(InputError, match=r"\[0.0, 80.0\]"):
        device.set_options(temperature_c=90.0)
    narrow = folder / "narrow.toml"
    narrow.write_text((folder / "opu.toml").read_text().replace("temperature_max_c = 80.0", "temperature_max_c = 85.0"))
    narrowed = opu_hal.load_device(narrow)  # a calibrated device's settable range is the calibrated one
    assert narrowed.capabilities.settable["temperature_c"][:2] == (0.0, 80.0)
    with pytest.raises(InputError, match=r"outside its allowed range \[0.0, 80.0\]"):
        narrowed.set_options(temperature_c=85.0)
    other_exposure = folder / "exposure.toml"
    other_exposure.write_text(
        (folder / "opu.toml").read_text().replace("exposure_us = 100000.0", "exposure_us = 400.0")
    )
    with pytest.raises(CalibrationError, match=r"exposure 400.0 us is not among the calibrated exposures"):
        opu_hal.load_device(other_exposure)


def test_a_calibration_of_another_device_is_refused(calibrated):
    folder, _ = calibrated
    other = folder / "other.toml"
    other.write_text((folder / "opu.toml").read_text().replace("seed = 5", "seed = 6"))
    with pytest.raises(CalibrationError, match=r"key 'device.seed' is 5 .* has 6"):
        opu_hal.load_device(other)


def test_privacy_counts_of_a_calibrated_device_are_planned_with_the_calibrations_lower_bound(tmp_path):
    keys = dict(
        backend="simulated",
        in_features=8,
        out_features=256,
        seed=3,
        temperature_c=25.0,
        exposure_us=400.0,
        laser_power_uw=0.7,
        anchor_power_uw=2.0,
        gain_e_per_dn=1.0,
        adc_bits=12,
        black_level_dn=64,
        full_well_e=10000.0,
        temperature_min_c=0.0,
        temperature_max_c=80.0,
        privacy_anchor="reference-beam",
    )
    model_device = opu_hal.load_device(opu_hal.validate_profile(keys))
    calibration = as_if_unity_measured(  # a measured interval does not prove unity (tests/test_unity_gain.py)
        calibrate_device(model_device, [25.0], [400.0], [100_000.0], frames=8, bootstrap=50)
    )
    write_calibration(calibration, tmp_path / "cal.json")
    lines = [f"{k} = {json.dumps(v)}" for k, v in opu_hal.validate_profile(keys).model_dump().items() if v is not None]
    (tmp_path / "dp.toml").write_text("\n".join(lines + ['calibration = "cal.json"']) + "\n")
    calibrated_device = opu_hal.load_device(opu_hal.load_profile(tmp_path / "dp.toml"))
    lower = calibration.operating_points[0].anchor_read_e_min_pixel_lower
    assert 0 < lower < model_device.anchor_read_e

    counts = calibrated_device.draw_privacy_counts(4, 1e6).distribution
    model = model_device.draw_privacy_counts(4, 1e6).distribution
    assert counts.reads_per_value == math.ceil(1e6 / lower) > model.reads_per_value
    assert "cal.json" in counts.mean_source and "model" in model.mean_source
    assert counts.poisson_mean_lower == 1e6 <= counts.poisson_mean
    with pytest.raises(InputError, match=r"outside its allowed range \[25.0, 25.0\]"):
        calibrated_device.set_options(temperature_c=30.0)


# -- the plan ------------------------------------------------------------------------------------
def shape(**overrides) -> RunShape:
    keys = dict(sampling="poisson", dataset_size=60000, batch_size=256, steps=3516, sensitivity=0.01)
    keys.update(overrides)
    return RunShape(**keys)


def test_gaussian_plan_ranks_reaching_points_by_time_then_noise(calibrated):
    folder, calibration = calibrated
    profile = opu_hal.load_profile(folder / "opu.toml")
    plans = plan_gaussian(calibration, profile, 8.0, 1e-5, shape(), lambda e, d, s: 1.0)
    reaching = [p for p in plans if p.reaches_target]
    assert reaching and plans[: len(reaching)] == reaching
    assert all(p.supplied >= p.needed for p in reaching)
    assert [p.noise_std for p in reaching] == sorted(p.noise_std for p in reaching)


def test_an_unreachable_target_says_what_would_reach_it(calibrated):
    folder, calibration = calibrated
    profile = opu_hal.load_profile(folder / "opu.toml")
    plans = plan_gaussian(calibration, profile, 0.01, 1e-5, shape(), lambda e, d, s: 1e6)
    assert not any(p.reaches_target for p in plans)
    assert "short" in what_would(plans, calibration) and "hotter sensor" in what_would(plans, calibration)


def test_skellam_plan_reads_ceil_mu_over_the_worst_pixel_lower_bound(unity_calibrated):
    """Test-only planner: the Gaussian-equivalent Poisson mean (variance 2 mu = (z * Delta_e)^2),
    an approximation used here to exercise the mapping, not a privacy guarantee."""
    folder, calibration = unity_calibrated
    profile = opu_hal.load_profile(folder / "opu.toml")
    seen = []

    def gaussian_equivalent(epsilon, delta, run):
        seen.append(run.sensitivity_e)
        return (40.0 * run.sensitivity_e) ** 2 / 2

    plans = plan_skellam(calibration, profile, 2.0, 1e-5, shape(), gaussian_equivalent)
    assert seen and all(s > 0 for s in seen)
    for p in plans:
        assert p.reads_per_value == math.ceil(p.needed / p.supplied)
        assert p.frames_per_step == 2 * p.reads_per_value * 256
    assert plans[0].supplied == max(p.supplied for p in plans)  # the most electrons per read: fewest reads


def test_skellam_plan_is_refused_when_the_measured_gain_interval_excludes_unity(calibrated):
    """Issue 36: the Skellam source reads electrons as DN one to one; a camera measured at ~3 e-/DN
    is refused, naming the measured interval (the profile's declared gain is not what is checked)."""
    folder, calibration = calibrated
    profile = opu_hal.load_profile(folder / "opu.toml")
    gain = calibration.gain_e_per_dn
    assert not gain.lower <= 1.0 <= gain.upper
    with pytest.raises(
        CalibrationError, match=rf"interval \[{gain.lower:.5g}, {gain.upper:.5g}\] e-/DN.*does not prove unity gain"
    ):
        plan_skellam(calibration, profile, 2.0, 1e-5, shape(), lambda e, d, s: 1.0)


def test_lattice_plan_camera_time_matches_an_independent_count_of_frames_times_frame_period(unity_calibrated):
    """Issue 29: the planner's camera time, recounted: two counts per coordinate, one read per
    pixel of the whole sensor, frames lasting max(frame_period_us, exposure_us)."""
    from opu_hal.privacy.skellam import required_poisson_mean

    folder, calibration = unity_calibrated
    profile = opu_hal.load_profile(folder / "opu.toml")
    run = RunShape(
        sampling="fixed",
        dataset_size=54000,
        batch_size=2048,
        steps=520,
        sensitivity=1.0,
        dimension=1_018_890,
        lattice_resolution=20.0,
        rounding_analysis="per-coordinate",
    )
    for plan in plan_skellam(calibration, profile, 8.0, 1e-5, run, required_poisson_mean):
        frames = math.ceil(2 * 1_018_890 * plan.reads_per_value / profile.sensor_pixels)
        period_s = max(profile.frame_period_us, plan.exposure_us) * 1e-6
        assert plan.frames_per_step == frames and plan.frames_total == 520 * frames
        assert plan.time_s == pytest.approx(520 * frames * period_s)
        assert plan.reads_per_value * plan.supplied >= plan.needed  # the reads supply the mean accounted


def test_camera_trade_off_costs_no_frames_below_the_resolution_one_read_supplies(unity_calibrated):
    from opu_hal.calibration.camera_plan import trade_off
    from opu_hal.privacy.skellam import required_poisson_mean

    folder, calibration = unity_calibrated
    profile = opu_hal.load_profile(folder / "opu.toml")
    run = RunShape(
        sampling="fixed",
        dataset_size=54000,
        batch_size=2048,
        steps=100,
        sensitivity=1.0,
        dimension=2_000_000,
        lattice_resolution=5.0,
        rounding_analysis="per-coordinate",
    )
    best = plan_skellam(calibration, profile, 8.0, 1e-5, run, required_poisson_mean)[0]
    rows = trade_off(best, run, 8.0, 1e-5, required_poisson_mean, profile.sensor_pixels, 5e-4)
    below, fill, above = rows[1], rows[2], rows[3]  # k x 1/2, x 1, x 2
    assert below.reads_per_count == fill.reads_per_count == 1 and below.camera_seconds == fill.camera_seconds
    assert below.noise_over_sensitivity == pytest.approx(2 * fill.noise_over_sensitivity)
    assert above.reads_per_count >= 3 and above.camera_seconds > fill.camera_seconds
    for row in rows:
        assert row.reads_per_count * best.supplied >= row.poisson_mean_needed
        assert row.camera_seconds == pytest.approx(row.frames_per_step * 100 * 5e-4)


# -- the CLI -------------------------------------------------------------------------------------
def test_cli_calibrate_writes_the_file_and_the_plot_and_plan_uses_them(tmp_path, capsys):
    profile = tmp_path / "p.toml"
    lines = [
        f"{k} = {json.dumps(v)}"
        for k, v in small_profile(out_features=256, gain_e_per_dn=1.0, full_well_e=3000.0).model_dump().items()
        if v is not None
    ]
    profile.write_text("\n".join(lines) + "\n")
    out = tmp_path / "cal.json"
    assert (
        main(
            [
                "calibrate",
                str(profile),
                "--temperatures",
                "20",
                "60",
                "--dark-exposures",
                "1000000",
                "--frames",
                "8",
                "--out",
                str(out),
                "--dataset-size",
                "60000",
                "--batch-size",
                "256",
                "--epochs",
                "1",
                "--sensitivity",
                "0.01",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "gain" in printed and "doubling at 25 C" in printed
    assert read_calibration(out).temperatures_c == [20.0, 60.0]
    assert out.with_suffix(".png").stat().st_size > 10_000
    code = main(
        [
            "plan",
            "--profile",
            str(profile),
            "--calibration",
            str(out),
            "--target-epsilon",
            "8",
            "--delta",
            "1e-5",
            "--dataset-size",
            "60000",
            "--batch-size",
            "256",
            "--epochs",
            "1",
            "--sensitivity",
            "0.01",
            "--json",
        ]
    )
    result = json.loads(capsys.readouterr().out)
    assert code in (0, 1) and len(result["plans"]) == 2 and result["mechanism"] == "gaussian"
    skellam = [
        "plan",
        "--profile",
        str(profile),
        "--calibration",
        str(out),
        "--target-epsilon",
        "8",
        "--dataset-size",
        "60000",
        "--batch-size",
        "256",
        "--epochs",
        "1",
        "--mechanism",
        "skellam",
    ]
    lattice = ["--sampling", "fixed", "--dimension", "1000", "--lattice-resolution", "20"]
    assert main(skellam + lattice) == 2  # as measured, the gain interval does not prove 1 e-/DN
    assert "does not prove unity gain" in capsys.readouterr().err
    write_calibration(as_if_unity_measured(read_calibration(out)), out)
    assert main(skellam + ["--sampling", "fixed"]) == 2
    assert "needs --dimension" in capsys.readouterr().err
    assert main(skellam + ["--sampling", "rejection", "--dimension", "1000", "--lattice-resolution", "20"]) == 2
    assert "got sampling 'rejection'" in capsys.readouterr().err
    assert main(skellam + ["--sampling", "poisson", "--dimension", "1000", "--lattice-resolution", "20"]) == 0
    assert "(poisson)" in capsys.readouterr().out
    assert main(skellam + ["--sampling", "fixed", "--dimension", "1000", "--lattice-resolution", "20", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["mechanism"] == "skellam" and len(result["plans"]) == 2
    assert all(p["reaches_target"] and p["reads_per_value"] >= p["needed"] / p["supplied"] for p in result["plans"])


def test_lattice_skellam_plan_is_the_smallest_poisson_mean_meeting_the_target():
    from opu_hal.privacy import Accountant
    from opu_hal.privacy.skellam import FixedSizeSkellamEvent, SkellamLattice, required_poisson_mean

    run = shape(sampling="fixed", dataset_size=5000, batch_size=250, steps=400, dimension=2000, lattice_resolution=20.0)
    mu = required_poisson_mean(4.0, 1e-5, run)
    lattice = SkellamLattice(2000, 1.0, 20.0)

    def epsilon(poisson_mean):
        accountant = Accountant(neighboring="replace_one")
        accountant.step(
            FixedSizeSkellamEvent(5000, 250, lattice.l2_sensitivity, lattice.l1_sensitivity, poisson_mean), 400
        )
        return accountant.get_epsilon(1e-5)

    assert epsilon(mu) <= 4.0 < epsilon(0.99 * mu)


def test_training_with_calibration_plans_its_privacy_counts_with_it_and_says_so(tmp_path):
    from opu_hal.calibration.anchor_map import calibrate_anchor_map
    from tests.training_helpers import clusters
    from trainers.core.errors import TrainingConfigError
    from trainers.run.config import TrainConfig
    from trainers.run.loop import train

    device = opu_hal.load_device("opu-sim-dp")
    calibration = calibrate_device(device, [25.0], [400.0], [100_000.0], frames=8, bootstrap=50)
    full = calibration.saturation_e.upper  # a gain interval that proves unity: the Skellam route, seconds to plan
    gain = calibration.gain_e_per_dn.model_copy(update={"value": 1.0, "lower": 1 - 0.4 / full, "upper": 1 + 0.4 / full})
    calibration = calibration.model_copy(update={"gain_e_per_dn": gain})
    write_calibration(calibration, tmp_path / "c.json")
    calibrate_anchor_map(device, calibration, tmp_path / "c.json", frames=8)  # the speckle anchor, every pixel
    config = TrainConfig.for_method(
        "dp-dfa",
        noise_source="device",
        profile="opu-sim-dp",
        target_epsilon=8.0,
        epochs=1,
        batch_size=100,
        hidden=(8,),
        alignment=False,
        calibration=str(tmp_path / "c.json"),
    )
    record = train(config, data=clusters(n_train=300), progress=False, log=lambda m: None)
    assert "c.anchor-map.npz" in record["privacy"]["device_noise"]["mean_source"]
    with pytest.raises(TrainingConfigError, match="--calibration applies to a device"):
        TrainConfig.for_method("dp-dfa", target_epsilon=8.0, calibration="c.json")
