"""The kept pixels of digitized speckle counts and their mean bins (:mod:`opu_hal.privacy.digitized_bins`).

A value reads ONE kept pixel ``2 reads`` times, so a kept pixel only needs a positive lower bound and an
upper bound below the clip ceiling; the accounting charges the worst bin of kept means. The threshold on
the lower bound trades pixels against the dimmest bin: by default it maximizes ``t K(t)`` (the accounted
photo-electrons per frame, ``K(t)`` the pixels whose lower bound is at least ``t``), which is what the
reads needed scale with; for draws of a known number of values it maximizes ``t_m / m`` over the passes
``m`` per draw (:func:`best_threshold`). Bins have geometric edges ``t ratio^j`` on the lower bounds; a bin's mean interval
is ``[min L, max U]`` over its pixels.

A band ``R`` (:func:`select_band`) keeps only the pixels with ``t <= L_j`` and ``U_j <= R t``: the applied
noise is then at most ``R`` times the accounted at every kept pixel, where the unbanded selection keeps
pixels up to the clip ceiling (its kept means average 1.45 to 1.69 times the dimmest bin's on the main job's
device, which is noise the accounting does not credit). Fewer pixels pass, so a draw takes more frames.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .anchor_map import AnchorBoundMap, Index

MAX_PASSES = 64  # passes over the kept pixels per draw tried by best_threshold
NEAR_BEST = 0.95  # best_threshold: thresholds per pass within 5 % of the best count as ties
BIN_RATIO = 1.5  # edges of the mean bins: t, 1.5 t, 2.25 t, ... (benchmarks/speckle_bin_ratio.py; docs/speckle.md)


@dataclass(frozen=True)
class BinnedSelection:
    """The kept pixels (sorted indices), their mean bins ``(min L, max U)`` and the threshold, ceiling and
    ratio that chose them."""

    kept: Index
    bins: tuple[tuple[float, float], ...]
    threshold_e: float
    ceiling_e: float
    ratio: float

    @property
    def kept_pixels(self) -> int:
        return int(self.kept.size)

    def frames(self, n_values: int, reads: int) -> int:
        """``2 reads ceil(n / K)``: each pass over the kept pixels serves ``K`` values in ``2 reads`` frames."""
        return 2 * reads * -(-n_values // self.kept_pixels)

    def value_pixels(self, n_values: int) -> Index:
        """The pixel each value reads: ``kept[i mod K]`` (fixed before any data is seen)."""
        return self.kept[np.arange(n_values, dtype=np.int64) % self.kept.size]


def eligible_pixels(bounds: AnchorBoundMap, ceiling_e: float) -> Index:
    """Pixels with a positive lower bound and an upper bound at most ``ceiling_e`` (no read clips)."""
    return np.flatnonzero((bounds.lower_e > 0) & (bounds.upper_e <= ceiling_e)).astype(np.int64)


def best_threshold(bounds: AnchorBoundMap, ceiling_e: float, values: int | None = None) -> float:
    """The threshold on the lower bound (module docstring). Without ``values``: the eligible pixel's lower
    bound ``t`` that maximizes ``t K(t)``. For draws of ``values`` values: for ``m = 1, 2, ...`` passes over the
    kept pixels, ``t_m`` the largest threshold keeping ``ceil(values / m)`` pixels, and the ``t_m`` that
    maximizes ``t_m / m`` (frames ``2 reads m`` with ``reads`` about ``mu / t_m`` for a needed count mean
    ``mu``); of the ``t_m`` within :data:`NEAR_BEST` of that, the largest (reads are whole: fewer of them on
    brighter pixels cost the same frames with less applied noise over the accounted)."""
    lower = np.sort(bounds.lower_e[eligible_pixels(bounds, ceiling_e)])[::-1]
    if lower.size == 0:
        raise ValueError(
            f"no pixel has a positive lower bound and an upper bound below the clip ceiling {ceiling_e:.4g} e-"
        )
    if values is None:
        return float(lower[int(np.argmax(lower * np.arange(1, lower.size + 1)))])
    if not (isinstance(values, int) and values >= 1):
        raise ValueError(f"values per draw must be an integer >= 1, got {values!r}")
    passes = np.arange(-(-values // lower.size), MAX_PASSES + 1)
    if passes.size == 0:
        passes = np.array([-(-values // lower.size)])
    thresholds = lower[-(-values // passes) - 1]
    score = thresholds / passes
    return float(thresholds[score >= NEAR_BEST * score.max()].max())


def band_counts(bounds: AnchorBoundMap, ceiling_e: float, band: float, thresholds: np.ndarray) -> np.ndarray:
    """``K(t)``: the eligible pixels with ``t <= L_j`` and ``U_j <= band t``, at each threshold ``t``."""
    eligible = eligible_pixels(bounds, ceiling_e)
    return _band_counts(bounds.lower_e[eligible], bounds.upper_e[eligible], band, thresholds)


def _band_counts(lower: np.ndarray, upper: np.ndarray, band: float, thresholds: np.ndarray) -> np.ndarray:
    """:func:`band_counts` of pixels already found eligible. A pixel counts for ``t`` in ``[U_j / band, L_j]``,
    so ``K`` is a difference of two sorted counts."""
    usable = upper <= band * lower
    starts, ends = np.sort(upper[usable] / band), np.sort(lower[usable])
    counts: np.ndarray = np.searchsorted(starts, thresholds, side="right") - np.searchsorted(ends, thresholds)
    return counts


def select_band(bounds: AnchorBoundMap, ceiling_e: float, band: float, values: int) -> BinnedSelection:
    """The pixels of one band ``[t, band t]`` (module docstring), ``t`` maximizing ``t / m`` over the passes
    ``m = ceil(values / K(t))`` per draw (the largest ``t`` within :data:`NEAR_BEST` of the best); one bin."""
    if not (math.isfinite(band) and band > 1):
        raise ValueError(f"speckle band must be finite and > 1, got {band}")
    if not (isinstance(values, int) and values >= 1):
        raise ValueError(f"values per draw must be an integer >= 1, got {values!r}")
    eligible = eligible_pixels(bounds, ceiling_e)
    lower, upper = bounds.lower_e[eligible], bounds.upper_e[eligible]
    candidates = np.unique(lower)
    counts = _band_counts(lower, upper, band, candidates)
    some = counts > 0
    if not some.any():
        raise ValueError(f"no pixel's bounds fit a band of ratio {band:g} below the clip ceiling {ceiling_e:.4g} e-")
    passes = -(-values // counts[some])
    score = candidates[some] / passes
    threshold = float(candidates[some][score >= NEAR_BEST * score.max()].max())
    inside = (lower >= threshold) & (upper <= band * threshold)
    kept = eligible[inside]
    bins = ((float(lower[inside].min()), float(upper[inside].max())),)
    return BinnedSelection(kept=kept, bins=bins, threshold_e=threshold, ceiling_e=ceiling_e, ratio=band)


def select_binned(
    bounds: AnchorBoundMap,
    ceiling_e: float,
    threshold_e: float | None = None,
    ratio: float = BIN_RATIO,
    values: int | None = None,
) -> BinnedSelection:
    """The eligible pixels whose lower bound is at least ``threshold_e`` (default :func:`best_threshold` for
    draws of ``values`` values), binned by lower bound at edges ``threshold_e ratio^j``."""
    if not (math.isfinite(ratio) and ratio > 1):
        raise ValueError(f"bin ratio must be finite and > 1, got {ratio}")
    threshold = best_threshold(bounds, ceiling_e, values) if threshold_e is None else float(threshold_e)
    if not (math.isfinite(threshold) and threshold > 0):
        raise ValueError(f"threshold_e must be finite and > 0, got {threshold_e}")
    eligible = eligible_pixels(bounds, ceiling_e)
    kept = eligible[bounds.lower_e[eligible] >= threshold]
    if kept.size == 0:
        raise ValueError(
            f"no pixel's lower bound reaches {threshold:.4g} e- below the clip ceiling {ceiling_e:.4g} e-: "
            "a brighter anchor, a longer exposure or a lower threshold"
        )
    lower, upper = bounds.lower_e[kept], bounds.upper_e[kept]
    index = np.floor(np.log(lower / threshold) / math.log(ratio) + 1e-12).astype(np.int64)
    bins = tuple((float(lower[index == j].min()), float(upper[index == j].max())) for j in np.unique(index).tolist())
    return BinnedSelection(kept=kept, bins=bins, threshold_e=threshold, ceiling_e=ceiling_e, ratio=ratio)
