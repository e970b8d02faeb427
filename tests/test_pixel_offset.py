"""A speckle anchor's map on a camera whose pixels each have their own dark offset (DSNU's offset part): each
pixel's offset interval from the recorded darks replaces the pooled black level, and the plan counts the read
noise of the kept pixels. The hidden truth (each pixel's offset and anchor mean, the camera's read noise)
checks both; the pooled black level, computed here as the map did before, puts pixels above their truth."""

from __future__ import annotations

import shutil
from dataclasses import replace

import numpy as np
import pytest

import opu_hal
from opu_hal.calibration.anchor_map import anchor_map_path, bounds_from_frames, load_anchor_map, save_anchor_map
from opu_hal.calibration.anchor_upper import pooled_read_variance_dn2
from opu_hal.calibration.export_frames import export_frames
from opu_hal.calibration.pixel_offset import frame_moments, offset_bounds
from opu_hal.calibration.recorded_anchor_map import dark_series
from opu_hal.calibration.recorded_images import read_frame
from opu_hal.calibration.recorded_plan import recorded_noise, recorded_read_law
from opu_hal.calibration.recorded_speckle import kept_read_noise_e, speckle_selection
from opu_hal.calibration.schema import read_calibration
from opu_hal.cli import main
from opu_hal.contract.errors import CalibrationError
from tests.test_recorded_speckle import HIDDEN, HIDDEN_PROFILE, LIGHTON, PIXELS

DEVICE_BLACK_DN = 4  # the device's one black level; each pixel adds its own 0..12 DN (pooled near 10 DN)
DIMENSION = 1000


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """Frames of the hidden speckle camera with per-pixel offsets (32 frames a series), calibrated by
    `opu-hal calibrate`; each pixel's true offset (DN) and anchor mean (e-)."""
    folder = tmp_path_factory.mktemp("offset-lab")
    offsets = np.random.default_rng(3).integers(0, 13, PIXELS)
    device = opu_hal.load_device(opu_hal.validate_profile({**HIDDEN_PROFILE, "black_level_dn": DEVICE_BLACK_DN}))
    frames = folder / "frames"
    export_args = dict(frames=32, levels=40, anchor_frames=32, speckle_anchor=True, pixel_offset_dn=offsets)
    export_frames(device, frames, (25.0,), (400.0,), (1e5, 1e6), **export_args)
    profile = folder / "lighton-speckle.toml"
    profile.write_text(LIGHTON)
    assert (
        main(["calibrate", str(profile), "--frames-dir", str(frames), "--out", str(folder / "cal.json"), "--quiet"])
        == 0
    )
    profile.write_text(LIGHTON + 'calibration = "cal.json"\n')
    return folder, profile, DEVICE_BLACK_DN + offsets, np.array(device.anchor_means_e())


def anchor_frames(folder):
    return (read_frame(path, 8).ravel() for path in sorted((folder / "frames" / "anchor_25C_400us").glob("*.npy")))


def test_the_pooled_black_level_puts_some_pixels_lower_bound_above_its_true_mean(lab):
    folder, _, _, truth = lab
    cal = read_calibration(folder / "cal.json")
    black, gain = cal.black_level_dn, cal.gain_e_per_dn
    pooled = bounds_from_frames(
        anchor_frames(folder),
        255.0,
        (black.lower, black.upper),
        (gain.lower, gain.upper),
        0.01,
        "pooled",
        read_var_dn2=pooled_read_variance_dn2(cal.read_noise_e.upper, gain.lower),
    )
    assert np.count_nonzero(pooled.lower_e > truth) >= 1


def test_every_pixels_offset_interval_holds_its_true_offset(lab):
    folder, _, offset, _ = lab
    bounds = load_anchor_map(anchor_map_path(folder / "cal.json"), 25.0, 400.0)
    assert bounds.offset_low_dn is not None and bounds.offset_high_dn is not None
    assert np.all(bounds.offset_low_dn <= offset) and np.all(offset <= bounds.offset_high_dn)
    assert np.median(bounds.offset_high_dn - bounds.offset_low_dn) < 3  # narrow enough to keep pixels


def test_with_per_pixel_offsets_every_true_mean_lies_within_its_bounds(lab):
    folder, path, _, truth = lab
    bounds = load_anchor_map(anchor_map_path(folder / "cal.json"), 25.0, 400.0)
    assert np.all(bounds.lower_e <= truth) and np.all(truth <= bounds.upper_e)
    profile = opu_hal.load_profile(path)
    _, selection = speckle_selection(profile, recorded_noise(profile, None), DIMENSION)
    kept = selection.kept
    assert kept.size >= 16 and np.all(truth[kept] >= selection.threshold_e)


def test_the_plan_counts_the_smallest_read_noise_bound_over_the_kept_pixels(lab):
    folder, path, offset, _ = lab
    profile = opu_hal.load_profile(path)
    noise = recorded_noise(profile, None)
    bounds, selection = speckle_selection(profile, noise, DIMENSION)
    law = recorded_read_law(profile, noise, DIMENSION)
    floor = read_calibration(folder / "cal.json").read_noise_e_min_pixel_lower
    assert bounds.read_noise_lower_e is not None and floor is not None
    assert law.read_noise_e[0] == pytest.approx(bounds.read_noise_lower_e[selection.kept].min())
    assert floor <= law.read_noise_e[0] <= HIDDEN["read_noise_e"] <= law.read_noise_e[1]
    quiet_elsewhere = bounds.read_noise_lower_e.copy()  # a pixel left out is quieter than any kept one
    quiet_elsewhere[np.setdiff1d(np.arange(PIXELS), selection.kept)[0]] = 0.5
    kept_low, _ = kept_read_noise_e(replace(bounds, read_noise_lower_e=quiet_elsewhere), selection.kept, (0.01, 7.0))
    assert kept_low == law.read_noise_e[0] > 0.5
    assert (
        law.black_level_dn <= offset[selection.kept].min() <= offset[selection.kept].max() <= law.high("black_level_dn")
    )


def test_a_map_without_per_pixel_arrays_stays_readable_and_counts_the_pooled_read_noise(lab, tmp_path):
    folder, _, _, _ = lab
    bounds = load_anchor_map(anchor_map_path(folder / "cal.json"), 25.0, 400.0)
    older = replace(bounds, read_noise_lower_e=None, offset_low_dn=None, offset_high_dn=None)
    loaded = load_anchor_map(save_anchor_map(older, tmp_path / "old.anchor-map.npz", 25.0, 400.0), 25.0, 400.0)
    assert loaded.read_noise_lower_e is None and np.array_equal(loaded.lower_e, bounds.lower_e)
    assert kept_read_noise_e(loaded, np.arange(4), (0.5, 6.2)) == (0.5, 6.2)


def test_the_map_is_refused_without_a_dark_series_at_the_operating_point(lab, tmp_path):
    folder, _, _, _ = lab
    copy = tmp_path / "frames"
    shutil.copytree(folder / "frames", copy)
    manifest = copy / "manifest.toml"
    blocks = manifest.read_text().split("[[series]]")
    manifest.write_text("[[series]]".join(b for b in blocks if "dark_25C_400us" not in b))
    with pytest.raises(CalibrationError, match=r"manifest\.toml: 0 dark series \(kind 'dark'\) at 25 C, 400 us"):
        dark_series(copy, 25.0, 400.0)


def test_a_pixel_clipped_in_a_dark_frame_gets_an_unbounded_offset():
    rng = np.random.default_rng(0)
    darks = [rng.normal(10.0, 1.0, (16, 3)).round() for _ in range(3)]
    darks[1][5, 2] = 255.0  # a read at the ADC top: the pixel's dark mean is biased
    moments = [frame_moments(iter(d), 255.0, "darks") for d in darks]
    low, high = offset_bounds(moments[0], (100.0, moments[1]), (1000.0, moments[2]), 0.01)
    assert np.all(np.isfinite(low[:2])) and np.all(low[:2] <= 10.0) and np.all(high[:2] >= 10.0)
    assert low[2] == -np.inf and high[2] == np.inf
