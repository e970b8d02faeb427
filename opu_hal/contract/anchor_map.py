"""Per-pixel bounds on a speckle anchor's read, the pixels a privacy count reads, and the drift test.

A LightOn OPU has no reference beam: its privacy anchor is a DMD pattern whose light crosses the
scattering medium and reaches the camera as speckle, so one read of pixel ``j`` is
``Poisson(lambda_j)`` photo-electrons plus read noise, with ``lambda_j`` exponentially distributed
over pixels (times PRNU, plus dark signal; dead and dim pixels near 0). A calibration measures each
pixel: :class:`AnchorBoundMap` holds lower confidence bounds ``b_j <= lambda_j`` that hold
simultaneously over every pixel of the map (Bonferroni: each pixel at ``alpha / pixels``).

:func:`select_pixels` keeps the pixels whose bound clears a threshold ``tau = mu / r`` (and whose
upper bound stays below the clip ceiling); a count sums ``r`` reads of kept pixels, so its Poisson
mean is at least ``r min_kept b_j >= mu``. The two counts of a value read the same pixels in two
frames, so their difference is a zero-mean Skellam of mean ``Lambda_i = sum lambda_j >= mu``: a
symmetric Skellam(``mu``) plus independent noise (post-processing), which the accountant of ``mu``
covers. Frames per draw of ``n`` values: ``2 ceil(n r / K)`` for ``K`` kept pixels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats

Array = npt.NDArray[np.float64]
Index = npt.NDArray[np.int64]


@dataclass(frozen=True)
class AnchorBoundMap:
    """Per-pixel lower and upper confidence bounds (and estimates) of one anchor read's mean
    photo-electrons, simultaneous over all ``pixels`` at ``confidence``; measured on ``frames`` frames."""

    lower_e: Array
    upper_e: Array
    estimate_e: Array
    confidence: float
    frames: int
    source: str
    read_noise_lower_e: Array | None = None  # per-pixel read-noise lower bounds (None: a map without them)
    offset_low_dn: Array | None = None  # each pixel's dark offset interval (None: one black level for all)
    offset_high_dn: Array | None = None
    full_well_lower_e: Array | None = None  # each pixel's full-well lower bound (None: the pooled clip level)

    def __post_init__(self) -> None:
        extra = (self.read_noise_lower_e, self.offset_low_dn, self.offset_high_dn, self.full_well_lower_e)
        shapes = {self.lower_e.shape, self.upper_e.shape, self.estimate_e.shape} | {
            a.shape for a in extra if a is not None
        }
        if len(shapes) != 1 or self.lower_e.ndim != 1:
            raise ValueError(f"anchor map arrays must be 1-d and of one shape, got {sorted(shapes)}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"anchor map confidence must be in (0, 1), got {self.confidence}")

    @property
    def pixels(self) -> int:
        return int(self.lower_e.size)

    def minimum_over(self, kept: Index) -> float:
        """The smallest lower bound over the pixels ``kept`` (what a pooled accounting may use)."""
        return float(self.lower_e[kept].min())


@dataclass(frozen=True)
class PixelSelection:
    """The pixels a privacy count reads (``kept``, in read order), ``reads_per_count`` reads per count,
    the threshold on the lower bound and the clip ceiling on the upper bound that chose them."""

    kept: Index
    reads_per_count: int
    threshold_e: float
    ceiling_e: float
    accounted_mean: float  # reads_per_count * min kept lower bound, >= the Poisson mean asked for
    planned_mean: float  # reads_per_count * mean kept estimate: the typical count's mean

    @property
    def kept_pixels(self) -> int:
        return int(self.kept.size)

    def frames(self, n_values: int) -> int:
        """Frames of ``n_values`` values: two counts each, read in pairs of frames over the kept pixels."""
        return 2 * math.ceil(n_values * self.reads_per_count / self.kept_pixels)

    def count_means(self, pixel_means_e: Array, n_values: int) -> Array:
        """Each value's count mean ``Lambda_i``: the sum of ``pixel_means_e`` over the ``r`` kept pixels it
        reads, value ``i`` taking reads ``i r ... (i + 1) r - 1`` cyclically over the kept pixels."""
        means = pixel_means_e[self.kept]
        size, reads = means.size, self.reads_per_count
        cumulative = np.concatenate(([0.0], np.cumsum(means)))
        total, cycles, rest = cumulative[-1], reads // size, reads % size
        start = (np.arange(n_values, dtype=np.int64) * reads) % size
        stop = start + rest
        inside = cumulative[np.minimum(stop, size)] - cumulative[start]
        wrapped = np.where(stop > size, cumulative[np.maximum(stop - size, 0)], 0.0)
        return np.asarray(cycles * total + inside + wrapped, dtype=np.float64)


def read_counts(max_reads: int) -> list[int]:
    """The reads per count :func:`select_pixels` tries: every one up to 16, then steps of about 10 %."""
    counts, reads = [], 1
    while reads <= max_reads:
        counts.append(reads)
        reads = reads + 1 if reads < 16 else math.ceil(reads * 1.1)
    return counts


def select_pixels(
    bounds: AnchorBoundMap, poisson_mean: float, ceiling_e: float, max_overshoot: float = 1.3, max_reads: int = 4096
) -> PixelSelection:
    """The selection of fewest reads per kept pixel (fewest frames) for counts of Poisson mean
    ``>= poisson_mean``: for ``r`` reads per count, the pixels whose lower bound is at least
    ``poisson_mean / r``, whose upper bound is at most ``ceiling_e`` (no read clips), and, dimmest
    first, as many as keep the planned count mean (``r`` times their mean estimate) within
    ``max_overshoot`` of ``poisson_mean`` (the applied noise the training sees over the accounted)."""
    if not (math.isfinite(poisson_mean) and poisson_mean > 0):
        raise ValueError(f"poisson_mean must be finite and > 0, got {poisson_mean}")
    if not max_overshoot >= 1:
        raise ValueError(f"max_overshoot must be >= 1, got {max_overshoot}")
    eligible = np.flatnonzero((bounds.upper_e <= ceiling_e) & (bounds.lower_e > 0))
    order = eligible[np.argsort(bounds.lower_e[eligible], kind="stable")]
    lower, estimate = bounds.lower_e[order], bounds.estimate_e[order]
    best: tuple[float, int, int, int] | None = None
    for reads in read_counts(max_reads):
        if best is not None and reads / lower.size >= best[0]:
            break  # every later count costs at least reads / (all pixels): none can beat the best
        first = int(np.searchsorted(lower * reads, poisson_mean, side="left"))
        if first >= lower.size or (best is not None and reads / (lower.size - first) >= best[0]):
            continue  # a cost of at least reads / (pixels above the threshold) cannot beat the best
        running = np.cumsum(estimate[first:]) / np.arange(1, lower.size - first + 1)
        within = np.flatnonzero(running * reads <= max_overshoot * poisson_mean)
        stop = first + (int(within[-1]) + 1 if within.size else 1)
        cost = reads / (stop - first)
        if best is None or cost < best[0]:
            best = (cost, reads, first, stop)
    if best is None:
        raise ValueError(
            f"no pixel's lower bound reaches {poisson_mean / max_reads:.4g} e- below the clip ceiling "
            f"{ceiling_e:.4g} e- (max_reads = {max_reads}): a brighter anchor or a longer exposure"
        )
    _, reads, first, stop = best
    kept = np.sort(order[first:stop]).astype(np.int64)
    return PixelSelection(
        kept=kept,
        reads_per_count=reads,
        threshold_e=poisson_mean / reads,
        ceiling_e=ceiling_e,
        accounted_mean=reads * float(bounds.lower_e[kept].min()),
        planned_mean=reads * float(bounds.estimate_e[kept].mean()),
    )


def clip_bound(mean_e: float, top_e: float, bottom_e: float, read_noise_e: float) -> float:
    """Upper bound on the probability that one read of Poisson(``mean_e``) electrons plus normal read
    noise leaves ``(bottom_e, top_e)``: Poisson and normal tails at half the gap on each side."""
    if not bottom_e < mean_e < top_e:
        return 1.0
    read = max(read_noise_e, 1e-12)
    up, down = (top_e - mean_e) / 2, (mean_e - bottom_e) / 2
    above = stats.poisson.sf(math.floor(mean_e + up), mean_e) + stats.norm.sf(up / read)
    below = stats.poisson.cdf(math.ceil(mean_e - down) - 1, mean_e) + stats.norm.sf(down / read)
    return float(min(1.0, above + below))


def clip_ceiling_e(top_e: float, bottom_e: float, read_noise_e: float, limit: float = 1e-24) -> float:
    """The largest read mean whose :func:`clip_bound` is at most ``limit`` (bisection; 0 if none)."""
    low, high = max(bottom_e, 0.0), top_e
    for _ in range(60):
        middle = 0.5 * (low + high)
        low, high = (middle, high) if clip_bound(middle, top_e, bottom_e, read_noise_e) <= limit else (low, middle)
    return low


@dataclass(frozen=True)
class DriftCheck:
    """One re-read of the anchor at the kept pixels: the pooled z statistic of ``sum (x_j - b_j)``,
    the pixels whose read lies below their bound by more than the Bonferroni margin, and the verdict."""

    step: int
    z_pooled: float
    pixels_below: int
    alpha: float
    passed: bool


def drift_test(reads_e: Array, lower_e: Array, read_noise_e: float, step: int, alpha: float = 1e-6) -> DriftCheck:
    """Test ``lambda_j >= b_j`` at every kept pixel from one frame of reads ``x_j`` (electrons): fail when
    the pooled ``z = sum (x_j - b_j) / sqrt(sum (max(x_j, b_j) + s^2))`` is below ``-z_{alpha/2}``, or when
    some ``x_j < b_j - z_{alpha / 2K} sqrt(b_j + s^2)`` (normal approximation of Poisson plus read noise
    ``s``; each test at ``alpha / 2``, so a faithful anchor fails a check with probability about ``alpha``)."""
    variance = read_noise_e**2 + 1 / 12
    pooled = float(np.sum(reads_e - lower_e) / math.sqrt(float(np.sum(np.maximum(reads_e, lower_e) + variance))))
    margin = stats.norm.isf(alpha / (2 * reads_e.size)) * np.sqrt(lower_e + variance)
    below = int(np.count_nonzero(reads_e < lower_e - margin))
    passed = pooled >= -stats.norm.isf(alpha / 2) and below == 0
    return DriftCheck(step=step, z_pooled=pooled, pixels_below=below, alpha=alpha, passed=passed)


def drift_check_frames(draws: int, check_every: int) -> int:
    """Anchor frames the drift watch reads over ``draws`` privacy draws: one before the first draw and one
    every ``check_every`` draws after it (draws 0, ``check_every``, ...), i.e. ``ceil(draws / check_every)``."""
    if draws < 0 or check_every < 1:
        raise ValueError(f"draws must be >= 0 and check_every >= 1, got {draws} and {check_every}")
    return -(-draws // check_every)
