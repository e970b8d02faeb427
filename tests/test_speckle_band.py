"""One band of speckle pixels for digitized counts (opu_hal/contract/speckle_bins.py, select_band): every kept
pixel's bounds lie in [t, band t], so the noise a kept pixel applies is at most band times the accounted; the
threshold is the best throughput t / passes; the profile key is a choice of pixels, not camera physics."""

from __future__ import annotations

import numpy as np
import pytest

import opu_hal
from opu_hal.backends.simulated.speckle_privacy import SpecklePrivacy
from opu_hal.calibration.run import physics_of
from opu_hal.contract.anchor_map import AnchorBoundMap
from opu_hal.contract.speckle_bins import NEAR_BEST, band_counts, select_band, select_binned


def _speckle_map(pixels: int = 5000, seed: int = 0) -> AnchorBoundMap:
    """Exponential speckle means with bounds 5 % either side, a few dead pixels."""
    rng = np.random.default_rng(seed)
    means = rng.exponential(800.0, pixels)
    means[:20] = 0.0
    return AnchorBoundMap(means * 0.95, means * 1.05 + 1e-9, means, 0.99, 32, "test")


@pytest.mark.parametrize("band", [1.5, 2.0, 3.0])
def test_band_counts_equal_a_direct_count(band):
    bounds = _speckle_map()
    thresholds = np.array([50.0, 400.0, 800.0, 1500.0, 3000.0])
    got = band_counts(bounds, 4000.0, band, thresholds)
    lower, upper = bounds.lower_e, bounds.upper_e
    eligible = (lower > 0) & (upper <= 4000.0)
    want = [int(np.sum(eligible & (lower >= t) & (upper <= band * t))) for t in thresholds]
    assert got.tolist() == want


@pytest.mark.parametrize("band, values", [(1.5, 3000), (2.0, 3000), (2.0, 20000)])
def test_every_kept_pixel_lies_in_one_band_at_a_best_throughput_threshold(band, values):
    bounds = _speckle_map()
    chosen = select_band(bounds, 4000.0, band, values)
    t = chosen.threshold_e
    assert len(chosen.bins) == 1 and chosen.bins[0][0] >= t and chosen.bins[0][1] <= band * t
    assert np.all(bounds.lower_e[chosen.kept] >= t) and np.all(bounds.upper_e[chosen.kept] <= band * t)
    candidates = np.unique(bounds.lower_e[bounds.lower_e > 0])  # a direct scan of every threshold
    counts = band_counts(bounds, 4000.0, band, candidates)
    some = counts > 0
    best = float(np.max(candidates[some] / -(-values // counts[some])))
    assert t / -(-values // chosen.kept_pixels) >= NEAR_BEST * best


def test_a_band_keeps_the_applied_noise_closer_to_the_accounted_than_the_bins():
    bounds = _speckle_map(20000)
    binned = select_binned(bounds, 4000.0, values=8000)
    banded = select_band(bounds, 4000.0, 1.5, 8000)

    def overshoot(selection):
        return float(bounds.estimate_e[selection.kept].mean() / bounds.lower_e[selection.kept].min())

    assert overshoot(banded) <= 1.5 / 0.95 < overshoot(binned)
    assert banded.frames(8000, 1) >= binned.frames(8000, 1)  # the price: more passes a draw


def test_a_band_that_nothing_fits_and_bad_arguments_are_refused_by_name():
    bounds = AnchorBoundMap(np.array([100.0, 200.0]), np.array([400.0, 900.0]), np.array([150.0, 300.0]), 0.99, 8, "t")
    with pytest.raises(ValueError, match="no pixel's bounds fit a band of ratio 1.5"):
        select_band(bounds, 4000.0, 1.5, 10)
    with pytest.raises(ValueError, match="speckle band must be finite and > 1"):
        select_band(bounds, 4000.0, 1.0, 10)
    with pytest.raises(ValueError, match="values per draw must be an integer >= 1"):
        select_band(bounds, 4000.0, 2.0, 0)


def test_the_device_selects_one_band_where_its_profile_sets_one():
    bounds = _speckle_map()
    privacy = SpecklePrivacy(None, "test", 25, 1.3, band=2.0)  # type: ignore[arg-type]  # no anchor needed here
    privacy.values_per_draw = 3000
    assert len(privacy.binned_selection(bounds, 4000.0).bins) == 1
    unbanded = SpecklePrivacy(None, "test", 25, 1.3)  # type: ignore[arg-type]
    unbanded.values_per_draw = 3000
    assert len(unbanded.binned_selection(bounds, 4000.0).bins) > 1


def test_the_band_is_not_camera_physics_so_one_calibration_serves_both():
    plain = opu_hal.load_profile("opu-sim-dp")
    banded = opu_hal.validate_profile({**plain.model_dump(exclude_none=True), "speckle_band": 2.0})
    assert physics_of(plain) == physics_of(banded)
