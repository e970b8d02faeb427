"""A recorded calibration attached end to end to a LightOn profile: frames of a hidden 8-bit camera in
lightonml's frame layout (one uint8 vector of ``out_features`` pixels a frame) -> ``opu-hal calibrate
PROFILE --frames-dir DIR`` -> the profile's ``calibration`` key -> ``opu-hal plan --profile PROFILE``
from the calibration alone; and the refusals that path owes (no calibration, unity gain, speckle, no
camera on lightonml's simulated device)."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

import opu_hal
from opu_hal.calibration.export_frames import export_frames
from opu_hal.calibration.recorded import calibrate_frames_dir
from opu_hal.calibration.recorded_plan import recorded_noise, recorded_read_law
from opu_hal.calibration.schema import write_calibration
from opu_hal.cli import main
from opu_hal.contract.errors import CalibrationError
from trainers.core.errors import TrainingConfigError
from trainers.methods.dfa_noise import check_noise_device

# The camera's hidden truth: the calibration never reads it.
HIDDEN = dict(read_noise_e=6.0, gain_e_per_dn=7.0, adc_bits=8, black_level_dn=10, full_well_e=10000.0)
PIXELS = 64
HIDDEN_PROFILE = dict(
    backend="simulated",
    in_features=10,
    out_features=PIXELS,
    seed=7,
    temperature_c=25.0,
    exposure_us=400.0,
    laser_power_uw=0.05,
    anchor_power_uw=3.0,
    privacy_anchor="reference-beam",
    **HIDDEN,
)


def lighton_profile(pixels: int, reference_beam: bool) -> str:
    """A real LightOn profile's text (``simulated = false``), with a reference beam or not."""
    beam = "anchor_power_uw = 3.0\n" if reference_beam else ""  # none: the anchor is speckle
    return f"""schema = 1
backend = "lighton"
in_features = 10
out_features = {pixels}
simulated = false
mode = "linear"
exposure_us = 400.0
temperature_c = 25.0
laser_power_uw = 0.05
{beam}"""


def plan_arguments(dimension: int) -> list[str]:
    """``opu-hal plan``'s run shape for the recorded-calibration tests (fixed-size batches)."""
    return [
        "--sampling", "fixed", "--dataset-size", "1000", "--batch-size", "100", "--steps", "10",
        "--target-epsilon", "8", "--dimension", str(dimension), "--lattice-resolution", "4",
    ]  # fmt: skip


LIGHTON = lighton_profile(PIXELS, reference_beam=True)
PLAN = plan_arguments(1000)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A lab's folder: frames exported from a hidden simulated camera behind a reference beam, and a LightOn
    profile naming the calibration `opu-hal calibrate` wrote from them."""
    folder = tmp_path_factory.mktemp("lighton-lab")
    hidden = opu_hal.validate_profile(HIDDEN_PROFILE)
    export_frames(opu_hal.load_device(hidden), folder / "frames", (25.0,), (400.0,), (1e5, 1e6), frames=4, levels=50)
    profile = folder / "lighton-lab.toml"
    profile.write_text(LIGHTON)
    args = ["calibrate", str(profile), "--frames-dir", str(folder / "frames"), "--out", str(folder / "cal.json")]
    assert main([*args, "--quiet"]) == 0
    profile.write_text(LIGHTON + 'calibration = "cal.json"\n')  # relative to the profile file
    return folder, profile


def test_the_exported_frames_have_lightonmls_layout(lab):
    folder, _ = lab
    frame = np.load(folder / "frames" / "anchor_25C_400us" / "0000.npy")
    assert frame.dtype == np.uint8 and frame.shape == (PIXELS,)


def test_a_lighton_profile_plans_digitized_noise_from_its_recorded_calibration_alone(lab, capsys):
    folder, profile = lab
    assert main(["plan", "--profile", str(profile), "--mechanism", "digitized", *PLAN, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["reads_per_count"] >= 1 and result["epsilon"] <= 8
    assert str(folder / "cal.json") in result["camera"]
    law = recorded_read_law(opu_hal.load_profile(profile), recorded_noise(opu_hal.load_profile(profile), None))
    assert law.gain_e_per_dn <= HIDDEN["gain_e_per_dn"] <= law.high("gain_e_per_dn")
    assert law.black_level_dn <= HIDDEN["black_level_dn"] <= law.high("black_level_dn")
    assert law.read_noise_e[0] <= HIDDEN["read_noise_e"] <= law.read_noise_e[1]
    assert law.adc_bits == 8 and law.pixels_per_frame == PIXELS  # the recorded frames', not the profile's keys
    assert law.frame_time_s == pytest.approx(1 / 340)  # CMV2000 datasheet, 10-bit mode for 8-bit reads


def test_the_digitized_plan_follows_the_runs_sampling(lab, capsys):
    """``--sampling poisson`` accounts the Poisson event (add/remove, Zhu-Wang Theorem 6), which needs no more
    reads than fixed-size batches at the same target; ``rejection`` is refused by name."""
    _, profile = lab
    reads = {}
    for sampling in ("fixed", "poisson"):
        arguments = [*PLAN[:1], sampling, *PLAN[2:]]
        assert main(["plan", "--profile", str(profile), "--mechanism", "digitized", *arguments, "--json"]) == 0
        reads[sampling] = json.loads(capsys.readouterr().out)["reads_per_count"]
    assert 1 <= reads["poisson"] <= reads["fixed"]
    assert main(["plan", "--profile", str(profile), "--mechanism", "digitized", *PLAN[:1], "rejection", *PLAN[2:]]) == 2
    assert "sampling 'rejection'" in capsys.readouterr().err


def test_frames_recorded_at_a_relative_illumination_under_a_camera_serial_plan_too(lab, tmp_path):
    folder, path = lab
    shutil.copytree(folder / "frames", tmp_path / "frames")
    manifest = tmp_path / "frames" / "manifest.toml"
    text = re.sub(r"(?m)^photons_per_pixel = .*\n", "", manifest.read_text())  # power = ... only
    manifest.write_text('serial = "CMV2000-1234"\n' + text)  # a device reads no serial back: kept as a note
    profile = opu_hal.load_profile(path)
    calibration = calibrate_frames_dir(tmp_path / "frames", profile=profile)
    assert calibration.quantum_efficiency is None and calibration.device.serial is None
    assert "camera serial CMV2000-1234 (the manifest's)" in calibration.notes
    write_calibration(calibration, tmp_path / "cal.json")
    law = recorded_read_law(profile, recorded_noise(profile, str(tmp_path / "cal.json")))
    assert law.gain_e_per_dn <= HIDDEN["gain_e_per_dn"] <= law.high("gain_e_per_dn")
    point = calibration.operating_points[0]  # the anchor as recorded, not rescaled by the profile's keys
    assert law.mean_e[0] == pytest.approx(point.anchor_read_e_min_pixel_lower)


def test_skellam_on_a_recorded_lighton_camera_is_refused_naming_unity_gain(lab, capsys):
    _, profile = lab
    assert main(["plan", "--profile", str(profile), "--mechanism", "skellam", *PLAN]) == 2
    assert "does not prove unity gain" in capsys.readouterr().err


def test_a_real_lighton_profile_without_a_calibration_is_refused_naming_the_file_and_key(tmp_path, capsys):
    profile = tmp_path / "no-cal.toml"
    profile.write_text(LIGHTON)
    assert main(["plan", "--profile", str(profile), "--mechanism", "digitized", *PLAN]) == 2
    assert f"{profile}: key 'calibration' is unset" in capsys.readouterr().err


def test_a_speckle_plan_on_a_calibration_without_the_anchor_map_is_refused_naming_the_missing_map(lab):
    """Frames calibrated for a reference-beam profile hold only pooled anchor figures: a profile without a
    reference beam (a speckle anchor) needs each pixel's bounds (tests/test_recorded_speckle.py plans one)."""
    _, path = lab
    profile = opu_hal.load_profile(path)
    speckle = profile.model_copy(update={"anchor_power_uw": None})
    with pytest.raises(CalibrationError, match=r"no per-pixel map of the speckle anchor \(.*cal\.anchor-map\.npz"):
        recorded_read_law(speckle, recorded_noise(profile, None), 1000)
    with pytest.raises(CalibrationError, match="give --dimension D"):
        recorded_read_law(speckle, recorded_noise(profile, None))


def test_frames_of_another_region_than_the_profile_reads_are_refused_naming_out_features(lab, tmp_path):
    folder, _ = lab
    other = tmp_path / "wide.toml"
    other.write_text(LIGHTON.replace(f"out_features = {PIXELS}", "out_features = 128"))
    with pytest.raises(CalibrationError, match="key 'out_features' = 128.*64 pixels"):
        calibrate_frames_dir(folder / "frames", profile=opu_hal.load_profile(other))


def test_devices_shows_the_calibration_a_profile_names(lab, capsys):
    folder, _ = lab
    assert main(["devices", "--dir", str(folder), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["calibration"] == {"path": str(folder / "cal.json"), "found": True}


def test_info_names_the_calibration_a_devices_noise_comes_from(lab, tmp_path, capsys):
    folder, _ = lab
    camera = tmp_path / "hidden.toml"  # the exported camera itself, its recorded calibration named in its profile
    camera.write_text("\n".join(f"{k} = {json.dumps(v)}" for k, v in HIDDEN_PROFILE.items()) + "\n")
    calibration = calibrate_frames_dir(folder / "frames", profile=opu_hal.load_profile(camera))
    write_calibration(calibration, tmp_path / "cal.json")
    camera.write_text(camera.read_text() + 'calibration = "cal.json"\n')
    assert main(["info", str(camera), "--json"]) == 0
    noise = json.loads(capsys.readouterr().out)["noise"]
    assert noise["source"] == "calibrated" and noise["calibration"] == str((tmp_path / "cal.json").resolve())


def test_device_noise_on_lightonmls_simulated_device_is_refused_naming_why():
    device = opu_hal.load_device("lighton-simulated")
    with pytest.raises(TrainingConfigError, match="without a camera.*none is faked.*--noise-source software"):
        check_noise_device(device)
