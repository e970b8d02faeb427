"""A LightOn OPU without a reference beam, planned from recorded frames: frames of a hidden 8-bit camera whose
anchor is a DMD pattern read as speckle -> ``opu-hal calibrate PROFILE --frames-dir DIR`` (with the per-pixel
anchor map beside the calibration) -> ``opu-hal plan --mechanism digitized``: kept pixels, mean bins, reads per
count, frames. The simulator's hidden truth (each pixel's mean, the camera) checks the bounds and the charge."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import opu_hal
from opu_hal.calibration.anchor_map import anchor_map_path, load_anchor_map
from opu_hal.calibration.export_frames import export_frames
from opu_hal.calibration.recorded import calibrate_frames_dir
from opu_hal.calibration.recorded_plan import recorded_noise, recorded_read_law
from opu_hal.calibration.recorded_speckle import speckle_selection
from opu_hal.calibration.schema import read_calibration, write_calibration
from opu_hal.cli import main
from opu_hal.contract.errors import CalibrationError
from opu_hal.privacy.digitized import CameraRead, difference_pmf
from opu_hal.privacy.digitized_events import DigitizedNoiseEvent, digitized_coefficients
from opu_hal.privacy.pmf_rdp import AccountedPMF
from tests.test_lighton_recorded import lighton_profile, plan_arguments

# The camera's hidden truth: the calibration never reads it.
HIDDEN = dict(read_noise_e=6.0, gain_e_per_dn=7.0, adc_bits=8, black_level_dn=10, full_well_e=10000.0)
PIXELS = 256
HIDDEN_PROFILE = dict(
    backend="simulated",
    in_features=10,
    out_features=PIXELS,
    sensor_pixels=PIXELS,  # the speckle over the region lightonml reads (n_components = out_features)
    seed=7,
    temperature_c=25.0,
    exposure_us=400.0,
    laser_power_uw=0.05,
    anchor_power_uw=1e-4,  # a median pixel near 200 e-, the brightest above the 8-bit range
    privacy_anchor="speckle",
    dead_pixel_fraction=0.02,
    dim_pixel_fraction=0.05,
    **HIDDEN,
)
LIGHTON = lighton_profile(PIXELS, reference_beam=False)  # no anchor_power_uw: no reference beam
DIMENSION = 1000
PLAN = plan_arguments(DIMENSION)
ORDERS = np.arange(2, 17, dtype=np.float64)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """Frames of the hidden speckle camera (32 a series and 32 anchor frames), the LightOn profile naming the calibration that
    `opu-hal calibrate` wrote from them, and each pixel's true anchor mean."""
    folder = tmp_path_factory.mktemp("speckle-lab")
    device = opu_hal.load_device(opu_hal.validate_profile(HIDDEN_PROFILE))
    export_frames(
        device,
        folder / "frames",
        (25.0,),
        (400.0,),
        (1e5, 1e6),
        frames=32,  # each dark series bounds its pixels' read noise (chi-square); 4 frames would leave 3 df
        levels=40,
        anchor_frames=32,
        speckle_anchor=True,
    )
    profile = folder / "lighton-speckle.toml"
    profile.write_text(LIGHTON)
    args = ["calibrate", str(profile), "--frames-dir", str(folder / "frames"), "--out", str(folder / "cal.json")]
    assert main([*args, "--quiet"]) == 0
    profile.write_text(LIGHTON + 'calibration = "cal.json"\n')
    return folder, profile, np.array(device.anchor_means_e())


def test_calibrate_writes_the_anchor_map_beside_the_calibration_and_names_it(lab):
    folder, _, _ = lab
    bounds = load_anchor_map(anchor_map_path(folder / "cal.json"), 25.0, 400.0)
    assert bounds.pixels == PIXELS and bounds.frames == 32
    # about half the pixels bound their read above 0 (their speckle's own draw: 125 of 256 at seed 7)
    assert np.all(bounds.lower_e <= bounds.upper_e) and np.count_nonzero(bounds.lower_e > 0) > 0.4 * PIXELS
    wells = bounds.full_well_lower_e  # each pixel's own, from the brightest flat: below the hidden well
    assert wells is not None and np.all(wells <= HIDDEN["full_well_e"]) and np.median(wells) > 1000
    notes = read_calibration(folder / "cal.json").notes
    assert any("speckle anchor map" in n and "cal.anchor-map.npz" in n for n in notes)


def test_a_speckle_lighton_profile_plans_digitized_counts_from_its_recorded_calibration(lab, capsys):
    folder, profile, _ = lab
    assert main(["plan", "--profile", str(profile), "--mechanism", "digitized", *PLAN, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    kept, reads = result["kept_pixels"], result["reads_per_count"]
    assert result["map_pixels"] == PIXELS and 1 <= kept < PIXELS and len(result["mean_bins"]) >= 1
    assert result["epsilon"] <= 8 and str(anchor_map_path(folder / "cal.json")) in result["camera"]
    assert result["frames_per_step"] == 2 * reads * math.ceil(DIMENSION / kept)
    assert result["camera_seconds_per_step"] == pytest.approx(result["frames_per_step"] / 340)  # CMV2000, 8-bit
    assert result["frames_total"] == 10 * result["frames_per_step"] + result["anchor_check_frames"]


def test_the_text_plan_says_how_many_pixels_were_kept_out_of_how_many(lab, capsys):
    _, profile, _ = lab
    assert main(["plan", "--profile", str(profile), "--mechanism", "digitized", *PLAN]) == 0
    out = capsys.readouterr().out
    assert f" of {PIXELS} kept pixels, one per value, in " in out and "reads per count: epsilon" in out


def selection_of(lab):
    _, path, truth = lab
    profile = opu_hal.load_profile(path)
    noise = recorded_noise(profile, None)
    return profile, noise, truth, *speckle_selection(profile, noise, DIMENSION)


def test_no_kept_pixels_true_mean_lies_outside_its_bounds_or_below_the_threshold(lab):
    _, noise, truth, bounds, selection = selection_of(lab)
    kept = selection.kept
    assert np.all(truth[kept] >= bounds.lower_e[kept]) and np.all(bounds.lower_e[kept] >= selection.threshold_e)
    assert np.all(truth[kept] <= bounds.upper_e[kept]) and bounds.upper_e[kept].max() <= noise.clip_ceiling_e()
    assert all(any(lo <= t <= hi for lo, hi in selection.bins) for t in truth[kept])
    assert np.all(truth[kept] >= selection.threshold_e)  # only pixels truly at or above the bound used
    assert truth[kept].min() > np.median(truth)  # dead, dim and dark pixels are left out
    assert truth.max() > noise.clip_ceiling_e() and truth[kept].max() <= noise.clip_ceiling_e()
    assert np.all(bounds.upper_e[kept] < bounds.full_well_lower_e[kept])  # no kept read reaches its own well


def test_the_charged_curve_bounds_the_exact_divergence_at_kept_pixels_true_means(lab):
    profile, noise, truth, _, selection = selection_of(lab)
    law = recorded_read_law(profile, noise, DIMENSION)
    assert law.gain_e_per_dn <= HIDDEN["gain_e_per_dn"] <= law.high("gain_e_per_dn")
    assert law.black_level_dn <= HIDDEN["black_level_dn"] <= law.high("black_level_dn")
    assert law.read_noise_e[0] <= HIDDEN["read_noise_e"] <= law.read_noise_e[1]
    assert law.full_well_e <= HIDDEN["full_well_e"] <= law.high("full_well_e")
    reads, k = 2, 2.0
    event = DigitizedNoiseEvent(
        law.mean_e[0],
        law.read_noise_e[0],
        law.gain_e_per_dn,
        law.adc_bits,
        law.black_level_dn,
        law.full_well_e,
        reads,
        k,
        DIMENSION,
        mean_e_high=law.mean_e[1],
        read_noise_e_high=law.read_noise_e[1],
        gain_e_per_dn_high=law.gain_e_per_dn_high,
        black_level_dn_high=law.black_level_dn_high,
        full_well_e_high=law.full_well_e_high,
        mean_bins=law.mean_bins,
    )
    charged = event.base_rdp(ORDERS) / event.l2_sensitivity**2
    kept = truth[selection.kept]
    for mean in (kept.min(), float(np.median(kept)), kept.max()):  # the dimmest, a typical and the brightest
        camera = CameraRead(float(mean), HIDDEN["read_noise_e"], 7.0, 8, 10.0, HIDDEN["full_well_e"])
        kappa, tau = digitized_coefficients(camera, reads, 2)
        assert np.all(kappa[2:17] <= charged * (1 + 1e-9)) and tau < 1e-30
        model = AccountedPMF(difference_pmf(camera, reads), 2)
        for shift in (1, 2):
            divergence = model.shift_log_moments(ORDERS, shift) / (ORDERS - 1)
            assert np.all(divergence <= shift**2 * charged * (1 + 1e-9))


def test_a_calibration_without_the_anchor_map_is_refused_naming_the_file_and_the_map(lab, tmp_path, capsys):
    folder, path, _ = lab
    profile = opu_hal.load_profile(path)
    older = write_calibration(calibrate_frames_dir(folder / "frames", profile=profile), tmp_path / "old.json")
    with pytest.raises(CalibrationError, match=r"old\.json: no per-pixel map of the speckle anchor \(.*old\.anchor"):
        recorded_read_law(profile, recorded_noise(profile, str(older)), DIMENSION)
    argv = ["plan", "--profile", str(path), "--calibration", str(older), "--mechanism", "digitized", *PLAN]
    assert main(argv) == 2
    assert "old.anchor-map.npz is missing" in capsys.readouterr().err


def test_calibrate_refuses_a_speckle_profile_without_an_anchor_series_at_its_operating_point(lab, tmp_path, capsys):
    folder, _, _ = lab
    other = tmp_path / "other.toml"
    other.write_text(LIGHTON.replace("temperature_c = 25.0", "temperature_c = 30.0"))
    args = ["calibrate", str(other), "--frames-dir", str(folder / "frames"), "--out", str(tmp_path / "cal.json")]
    assert main([*args, "--quiet"]) == 2
    assert "0 anchor series (kind 'anchor') at 30 C, 400 us" in capsys.readouterr().err
    assert not (tmp_path / "cal.json").exists()  # refused before anything is written


def test_a_calibration_written_without_a_map_removes_an_earlier_map_beside_it(lab, tmp_path):
    """A map measured with another calibration's black-level and gain intervals must not pair with this one."""
    folder, _, _ = lab
    beam = tmp_path / "beam.toml"
    beam.write_text(LIGHTON + "anchor_power_uw = 1e-4\n")  # a reference beam: no map is measured
    stale = anchor_map_path(tmp_path / "cal.json")
    stale.write_bytes(b"an earlier calibration's map")
    args = ["calibrate", str(beam), "--frames-dir", str(folder / "frames"), "--out", str(tmp_path / "cal.json")]
    assert main([*args, "--quiet"]) == 0
    assert (tmp_path / "cal.json").is_file() and not stale.exists()
