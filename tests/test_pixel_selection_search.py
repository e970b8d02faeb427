"""The pixel selection's early stops (a read count whose least possible cost cannot beat the best is
skipped) choose what the exhaustive search over every read count chooses."""

from __future__ import annotations

import numpy as np
import pytest

from opu_hal.contract.anchor_map import AnchorBoundMap, read_counts, select_pixels


def exhaustive(bounds: AnchorBoundMap, mean: float, ceiling: float, overshoot: float = 1.3) -> tuple[int, int, int]:
    """(reads, first, stop) of the cheapest count, every read count tried (the search before its early stops)."""
    eligible = np.flatnonzero((bounds.upper_e <= ceiling) & (bounds.lower_e > 0))
    order = eligible[np.argsort(bounds.lower_e[eligible], kind="stable")]
    lower, estimate = bounds.lower_e[order], bounds.estimate_e[order]
    best: tuple[float, int, int, int] | None = None
    for reads in read_counts(4096):
        first = int(np.searchsorted(lower * reads, mean, side="left"))
        if first >= lower.size:
            continue
        running = np.cumsum(estimate[first:]) / np.arange(1, lower.size - first + 1)
        within = np.flatnonzero(running * reads <= overshoot * mean)
        stop = first + (int(within[-1]) + 1 if within.size else 1)
        if best is None or reads / (stop - first) < best[0]:
            best = (reads / (stop - first), reads, first, stop)
    assert best is not None
    return best[1], best[2], best[3]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("mean", [40.0, 900.0, 20_000.0])
def test_early_stops_choose_what_the_exhaustive_search_chooses(seed: int, mean: float) -> None:
    rng = np.random.default_rng(seed)
    estimate = rng.exponential(300.0, 20_000)  # speckle: exponential intensities
    bounds = AnchorBoundMap(0.9 * estimate, 1.1 * estimate + 1.0, estimate, 0.99, 100, "test")
    chosen = select_pixels(bounds, mean, 2_000.0)
    reads, first, stop = exhaustive(bounds, mean, 2_000.0)
    assert chosen.reads_per_count == reads
    assert chosen.kept.size == stop - first
