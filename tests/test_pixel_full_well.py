"""Each pixel's own full well, bounded from the brightest recorded flat (opu_hal/calibration/pixel_full_well.py):
on a hidden camera whose wells differ per pixel (a few fill early), every bound lies below its pixel's well, an
early well is found, and the recorded speckle plan keeps no pixel whose anchor read could reach its own well."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from opu_hal.calibration.pixel_full_well import full_well_lower_e
from opu_hal.calibration.pixel_offset import frame_moments
from opu_hal.calibration.recorded_speckle import kept_full_well_e, within_own_wells
from opu_hal.contract.anchor_map import AnchorBoundMap
from opu_hal.contract.speckle_bins import select_binned

GAIN, OFFSET, MAX_DN = 2.0, 12.0, 4095.0  # e-/DN, DN, 12-bit


def _camera(rng: np.random.Generator, pixels: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """Hidden wells (typical 6000 e-, every 25th pixel's at 1500 e-) and per-pixel sensitivities (PRNU 3 %)."""
    wells = np.full(pixels, 6000.0)
    wells[::25] = 1500.0
    return wells, rng.normal(1.0, 0.03, pixels)


def _flat(rng: np.random.Generator, wells: np.ndarray, sensitivity: np.ndarray, mean_e: float, frames: int):
    """``frames`` reads ``round(min(e, W_j) / g + noise) + o``, clipped to the ADC, e ~ Poisson."""
    reads = []
    for _ in range(frames):
        electrons = np.minimum(rng.poisson(mean_e * sensitivity), wells)
        reads.append(np.clip(np.rint(electrons / GAIN + rng.normal(0, 3.0, wells.size)) + OFFSET, 0, MAX_DN))
    return frame_moments(iter(reads), MAX_DN, "flat")


@pytest.mark.parametrize("seed", range(5))
def test_every_bound_lies_below_its_pixels_well_and_an_early_well_is_found(seed):
    rng = np.random.default_rng(seed)
    wells, sensitivity = _camera(rng)
    flat = _flat(rng, wells, sensitivity, mean_e=8000.0, frames=16)
    offset_high = np.full(wells.size, OFFSET + 0.8)  # an upper bound on each offset (pixel_offset.py)
    bound = full_well_lower_e(flat, offset_high, GAIN * 0.99, alpha=0.01)
    assert np.all(bound <= wells)
    early = wells < 6000
    assert np.all(bound[early] >= 0.95 * wells[early]) and np.all(bound[~early] >= 0.95 * 6000)


def test_a_pixel_not_yet_full_is_bounded_by_its_signal_below_its_well():
    rng = np.random.default_rng(9)
    wells, sensitivity = _camera(rng)
    flat = _flat(rng, wells, sensitivity, mean_e=1000.0, frames=16)  # below every well
    bound = full_well_lower_e(flat, np.full(wells.size, OFFSET + 0.8), GAIN, alpha=0.01)
    assert np.all(bound <= 1000.0 * sensitivity + 1.0) and np.all(bound > 800.0)


def test_a_pixel_with_an_unbounded_offset_gets_no_well_and_bad_alpha_is_refused():
    rng = np.random.default_rng(1)
    wells, sensitivity = _camera(rng, 10)
    flat = _flat(rng, wells, sensitivity, 8000.0, 8)
    offsets = np.full(10, OFFSET + 1.0)
    offsets[3] = np.inf  # clipped in the darks (pixel_offset.py): never kept
    assert full_well_lower_e(flat, offsets, GAIN, 0.01)[3] == 0.0
    with pytest.raises(ValueError, match="alpha must be in"):
        full_well_lower_e(flat, offsets, GAIN, 1.5)


def _map(wells: np.ndarray | None) -> AnchorBoundMap:
    lower = np.array([900.0, 1000.0, 1100.0, 1200.0])
    return AnchorBoundMap(lower, lower * 1.1, lower * 1.05, 0.99, 32, "test", full_well_lower_e=wells)


def test_a_pixel_whose_read_could_reach_its_own_well_is_not_kept():
    wells = np.array([6000.0, 1300.0, 6000.0, 6000.0])  # pixel 1's upper bound 1100 + room 300 > 1300
    bounds = within_own_wells(_map(wells), margin_e=300.0)
    kept = select_binned(bounds, 5000.0, threshold_e=800.0).kept
    assert 1 not in kept and set(kept) == {0, 2, 3}
    assert kept_full_well_e(bounds, kept, (5800.0, 6200.0)) == (5800.0, 6200.0)
    tight = replace(bounds, full_well_lower_e=np.array([6000.0, 1300.0, 5000.0, 6000.0]))
    assert kept_full_well_e(tight, kept, (5800.0, 6200.0)) == (5000.0, 6200.0)


def test_a_map_without_per_pixel_wells_is_unchanged():
    bounds = _map(None)
    assert within_own_wells(bounds, 300.0) is bounds and kept_full_well_e(bounds, np.arange(4), (1.0, 2.0)) == (
        1.0,
        2.0,
    )
