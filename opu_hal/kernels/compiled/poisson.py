"""Exact Poisson counts on the CPU, compiled: the algorithms of :mod:`opu_hal.kernels.poisson` (and of the GPU
kernel, :mod:`opu_hal.kernels.triton_camera`) on Philox counters, in branch-free passes.

- Means >= 10: PTRS (W. Hoermann, "The transformed rejection method for generating Poisson random
  variables", Insurance: Mathematics and Economics 12, 1993; numpy's ``random_poisson_ptrs``).
  Round ``r`` of pixel ``i`` uses the uniforms of counter ``(i, r, 0, 0)``. The rounds run as passes
  over the pixels still pending: round 0's squeeze for every pixel, round 0's exact test for those it
  left, then whole rounds. ``log k!`` comes from a table of float64 ``lgamma`` (numpy's
  ``random_loggam`` beyond it, in the one-pixel path).
- Means below 10: inversion by sequential search on the uniform of counter ``(i, 0xFFFFFFFF, 0, 0)``,
  the first 16 steps branch-free (the count is the number of ``F(k)`` below the uniform).
- A flat field (one mean ``s`` for every pixel, plus per-column dark means ``D_j < 10``):
  ``Poisson(s + D_j) = Poisson(s) + Poisson(D_j)`` for independent counts; ``Poisson(s)`` by
  inversion of one guide table (:func:`opu_hal.kernels.poisson.quantile_table`), ``Poisson(D_j)`` by
  sequential search.

Every pixel's count is what the one-pixel sequential algorithm gives on its own counters (tests
check this entry by entry), so the passes change the speed, never the distribution.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ..poisson import quantile_table
from .elementary import exp_neg, log_positive
from .philox import WORKSPACE, philox4x32, uniform53, unsettled, unsettled_pixels

PTRS_MIN_RATE = 10.0
INVERSION_ROUND = 0xFFFFFFFF  # the Philox round word of the inversion's one uniform
INVERSION_STEPS = 16  # the branch-free inversion settles counts below 16 (all but ~5 % at mean 10)
RECIPROCALS = 1.0 / np.maximum(np.arange(256.0), 1.0)  # 1 / k: the inversion multiplies
LOG_FACTORIALS = np.array([math.lgamma(k + 1.0) for k in range(1 << 15)])  # log k!, k < 32768


#: numpy's ``random_loggam`` series in ``1 / x^2``, highest order first (Horner); the Triton kernel
#: (:func:`opu_hal.kernels.triton_camera.loggam`) writes the same ten out.
STIRLING_COEFFICIENTS = (
    -1.39243221690590e00,
    1.796443723688307e-01,
    -2.955065359477124e-02,
    6.410256410256410e-03,
    -1.917526917526918e-03,
    8.417508417508418e-04,
    -5.952380952380952e-04,
    7.936507936507937e-04,
    -2.777777777777778e-03,
    8.333333333333333e-02,
)


@njit(inline="always", cache=True)
def _stirling_series(x):
    """``log Gamma(x) - (x - 1/2) log x + x`` by numpy's ``random_loggam`` series (x >= 7)."""
    x2 = 1.0 / (x * x)
    gl0 = STIRLING_COEFFICIENTS[0]
    for i in range(1, len(STIRLING_COEFFICIENTS)):
        gl0 = gl0 * x2 + STIRLING_COEFFICIENTS[i]
    return gl0 / x + 0.5 * 1.8378770664093453e00


@njit(inline="always", cache=True)
def loggam(x):
    """``log Gamma(x)`` for x >= 1, numpy's ``random_loggam``: the Stirling series at x + n >= 7."""
    if x <= 2.0:
        return 0.0
    n = math.floor(7.0 - x) if x < 7.0 else 0.0
    x0 = x + n
    gl = _stirling_series(x0) + (x0 - 0.5) * math.log(x0) - x0
    shift = 1.0
    for i in range(int(n)):
        shift *= x0 - 1.0 - i
    return gl - math.log(shift)


@njit(inline="always", cache=True)
def log_factorial(k):
    """``log k!`` from the table, by ``loggam`` beyond it."""
    return LOG_FACTORIALS[int(k)] if k < LOG_FACTORIALS.shape[0] else loggam(k + 1.0)


@njit(inline="always", cache=True)
def _ptrs_constants(lam):
    b = 0.931 + 2.53 * math.sqrt(lam)
    a = -0.059 + 0.02483 * b
    vr = 0.9277 - 3.6224 / (b - 2.0)
    return a, b, vr


@njit(inline="always", cache=True)
def _ptrs_proposal(lam, a, b, k0, k1, pixel, round_):
    """One PTRS proposal: ``(k, u_s, v)`` from the uniforms of counter ``(pixel, round_)``."""
    r0, r1, r2, r3 = philox4x32(k0, k1, pixel, round_, np.uint32(0), np.uint32(0))
    u = uniform53(r0, r1) - 0.5
    v = uniform53(r2, r3)
    us = 0.5 - abs(u)
    return math.floor((2.0 * a / us + b) * u + lam + 0.43), us, v


@njit(inline="always", cache=True)
def _ptrs_test(lam, log_lam, a, b, k, us, v, log_k_factorial):
    """PTRS's acceptance after a failed squeeze: ``k`` possible and
    ``log(V / alpha / (a / u_s^2 + b)) <= k log(lam) - lam - log k!`` (one log on the left)."""
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    possible = (k >= 0.0) & ((us >= 0.013) | (v <= us))
    log_target = k * log_lam - lam - log_k_factorial
    ratio = v * inv_alpha / (a / (us * us) + b)  # 0 only at v = 0: log is -inf, accepted
    return possible & ((ratio == 0.0) | (log_positive(max(ratio, 1e-300)) <= log_target))


@njit(cache=True)
def ptrs(lam, k0, k1, pixel, first_round):
    """A Poisson(``lam``) draw, ``lam >= 10``, by PTRS from round ``first_round`` on, one pixel."""
    a, b, vr = _ptrs_constants(lam)
    log_lam = log_positive(lam)
    round_ = np.uint32(first_round)
    while True:
        k, us, v = _ptrs_proposal(lam, a, b, k0, k1, pixel, round_)
        if (us >= 0.07 and v <= vr) or _ptrs_test(lam, log_lam, a, b, k, us, v, log_factorial(max(k, 0.0))):
            return k
        round_ += np.uint32(1)


@njit(cache=True)
def inversion(lam, k0, k1, pixel):
    """A Poisson(``lam``) draw, ``0 <= lam < 10``, by sequential search on one uniform, one pixel."""
    r0, r1, _, _ = philox4x32(k0, k1, pixel, np.uint32(INVERSION_ROUND), np.uint32(0), np.uint32(0))
    return sequential_search(uniform53(r0, r1), lam)


@njit(cache=True)
def sequential_search(u, lam):
    """The least ``k`` with ``u <= F(k)`` for Poisson(``lam``), ``0 <= lam < 10``, the CDF summed
    term by term (the sum :func:`_inversion_pass` also forms)."""
    p = exp_neg(lam)
    cumulative = p
    k = 0.0
    while u > cumulative:
        k += 1.0
        p = p * lam * (RECIPROCALS[int(k)] if k < RECIPROCALS.shape[0] else 1.0 / k)
        grown = cumulative + p
        if grown <= cumulative:  # float64 tail: u within rounding of 1
            break
        cumulative = grown
    return k


@njit(cache=True)
def sequential_counts(rates, k0, k1, out):
    """The reference: each pixel's count by the one-pixel algorithms, in order."""
    for i in range(rates.shape[0]):
        lam = rates[i]
        out[i] = ptrs(lam, k0, k1, np.uint32(i), 0) if lam >= PTRS_MIN_RATE else inversion(lam, k0, k1, np.uint32(i))
    return out


@njit(parallel=True, cache=True)
def _first_squeeze(rates, k0, k1, counts, settled):
    """PTRS's first proposal for every pixel, settled where its squeeze accepts; means below 10
    stay unsettled."""
    for i in prange(rates.shape[0]):
        lam = max(rates[i], PTRS_MIN_RATE)
        a, b, vr = _ptrs_constants(lam)
        k, us, v = _ptrs_proposal(lam, a, b, k0, k1, np.uint32(i), np.uint32(0))
        counts[i] = k
        settled[i] = (rates[i] >= PTRS_MIN_RATE) & (us >= 0.07) & (v <= vr)


@njit(cache=True)
def _split_small(rates, settled, small, large):
    """The unsettled pixels, split into means below 10 and the rest (branch-free)."""
    n_small = n_large = 0
    for i in range(rates.shape[0]):
        below = rates[i] < PTRS_MIN_RATE
        small[n_small] = np.int32(i)
        large[n_large] = np.int32(i)
        n_small += (not settled[i]) & below
        n_large += (not settled[i]) & (not below)
    return small[:n_small], large[:n_large]


@njit(parallel=True, cache=True)
def _ptrs_pass(rates, pending, k0, k1, round_, squeeze, counts, settled, undecided):
    """PTRS round ``round_`` for the ``pending`` pixels: accepted by the squeeze (when ``squeeze``;
    round 0's was already tried) or by the exact test; ``undecided`` where ``k`` is beyond the
    ``log k!`` table (:func:`_ptrs_undecided` finishes those)."""
    top = LOG_FACTORIALS.shape[0] - 1.0
    for j in prange(pending.shape[0]):
        i = pending[j]
        lam = rates[i]
        a, b, vr = _ptrs_constants(lam)
        k, us, v = _ptrs_proposal(lam, a, b, k0, k1, np.uint32(i), np.uint32(round_))
        counts[i] = k
        quick = squeeze & (us >= 0.07) & (v <= vr)
        in_table = k <= top
        exact = _ptrs_test(lam, log_positive(lam), a, b, k, us, v, LOG_FACTORIALS[int(min(max(k, 0.0), top))])
        settled[i] = quick | (in_table & exact)
        undecided[i] = ~quick & ~in_table


@njit(parallel=True, cache=True)
def _ptrs_undecided(rates, pending, undecided, k0, k1, round_, counts, settled):
    """PTRS from round ``round_``, one pixel at a time, where the table could not decide."""
    for j in prange(pending.shape[0]):
        i = pending[j]
        if undecided[i]:
            counts[i] = ptrs(rates[i], k0, k1, np.uint32(i), round_)
            settled[i] = True


@njit(parallel=True, cache=True)
def _inversion_pass(rates, pending, k0, k1, counts, settled):
    """Inversion's first 16 steps for the ``pending`` pixels (means below 10): the count is the
    number of ``F(0..15)`` below the uniform, settled unless ``F(15)`` is (the CDF accumulates as
    in :func:`inversion`, so the count is the one its search finds)."""
    for j in prange(pending.shape[0]):
        i = pending[j]
        lam = rates[i]
        r0, r1, _, _ = philox4x32(k0, k1, np.uint32(i), np.uint32(INVERSION_ROUND), np.uint32(0), np.uint32(0))
        u = uniform53(r0, r1)
        p = exp_neg(lam)
        cumulative = p
        k = 0.0
        for step in range(1, INVERSION_STEPS):
            k += u > cumulative
            p = p * lam * RECIPROCALS[step]
            cumulative = cumulative + p
        counts[i] = k + (u > cumulative)
        settled[i] = u <= cumulative


@njit(parallel=True, cache=True)
def _inversion_rest(rates, pending, k0, k1, counts):
    for j in prange(pending.shape[0]):
        i = pending[j]
        counts[i] = inversion(rates[i], k0, k1, np.uint32(i))


def poisson_counts(rates: np.ndarray, k0: np.uint32, k1: np.uint32, counts: np.ndarray | None = None) -> np.ndarray:
    """Exact Poisson counts (float64) of the float64 means ``rates`` (1-D, fewer than 2^31) under the
    Philox key ``(k0, k1)``, written into ``counts`` when given."""
    n = rates.shape[0]
    counts = np.empty(n) if counts is None else counts
    settled = WORKSPACE.array("settled", n, np.bool_)
    undecided = WORKSPACE.array("undecided", n, np.bool_)
    _first_squeeze(rates, k0, k1, counts, settled)
    small, pending = _split_small(
        rates, settled, WORKSPACE.array("small", n, np.int32), WORKSPACE.array("large", n, np.int32)
    )
    _inversion_pass(rates, small, k0, k1, counts, settled)
    _inversion_rest(rates, unsettled(small, settled), k0, k1, counts)
    round_ = 0
    while pending.shape[0]:
        _ptrs_pass(rates, pending, k0, k1, round_, round_ > 0, counts, settled, undecided)
        _ptrs_undecided(rates, pending, undecided, k0, k1, round_, counts, settled)
        pending = unsettled(pending, settled)
        round_ += 1
    return counts


@njit(parallel=True, cache=True)
def _flat_pass(columns, cdf, guide, dark_p0, k0, k1, counts, settled):
    """A flat field's ``Poisson(s)`` by the guide table from the first uniform of counter
    ``(pixel, 0, 0, 0)``, settled where one guide step finds it and the dark count is 0 (the second
    uniform ``<= exp(-D_j)``). Branch-free, row by row."""
    bins = guide.shape[0]
    for row in prange(counts.shape[0] // columns):
        for column in range(columns):
            i = row * columns + column
            r0, r1, r2, r3 = philox4x32(k0, k1, np.uint32(i), np.uint32(0), np.uint32(0), np.uint32(0))
            u = uniform53(r0, r1)
            index = guide[int(u * bins)]
            index += cdf[index] < u
            counts[i] = index
            settled[i] = (cdf[index] >= u) & (uniform53(r2, r3) <= dark_p0[column])


@njit(cache=True)
def flat_count(u, w, cdf, dark):
    """One flat-field pixel from its two uniforms: the table's index by binary search, plus the dark
    count by sequential search."""
    return np.searchsorted(cdf, u) + sequential_search(w, dark)


@njit(parallel=True, cache=True)
def _flat_rest(pending, columns, cdf, dark, k0, k1, counts):
    for j in prange(pending.shape[0]):
        i = pending[j]
        r0, r1, r2, r3 = philox4x32(k0, k1, np.uint32(i), np.uint32(0), np.uint32(0), np.uint32(0))
        counts[i] = flat_count(uniform53(r0, r1), uniform53(r2, r3), cdf, dark[i % columns])


@njit(cache=True)
def _exp_neg_all(values):
    out = np.empty_like(values)
    for i in range(values.shape[0]):
        out[i] = exp_neg(values[i])
    return out


def flat_table(rate: float) -> tuple[int, np.ndarray, np.ndarray]:
    """``(low, cdf, guide)`` of Poisson(``rate``) as numpy arrays (a one-entry table at rate 0)."""
    if rate <= 0:
        return 0, np.ones(1), np.zeros(4, dtype=np.int64)
    low, cdf, guide = quantile_table(rate)
    return low, cdf.numpy(), guide.numpy()


def flat_counts(
    rate: float, dark: np.ndarray, rows: int, k0: np.uint32, k1: np.uint32, counts: np.ndarray | None = None
) -> np.ndarray:
    """Exact counts (float64, ``rows x len(dark)``, row-major) of a flat field of ``rate`` electrons
    plus the dark means ``dark`` (one per column, each below 10)."""
    columns = dark.shape[0]
    n = rows * columns
    counts = np.empty(n) if counts is None else counts
    low, cdf, guide = flat_table(rate)
    settled = WORKSPACE.array("settled", n, np.bool_)
    _flat_pass(columns, cdf, guide, _exp_neg_all(dark), k0, k1, counts, settled)
    _flat_rest(unsettled_pixels(settled, WORKSPACE.array("small", n, np.int32)), columns, cdf, dark, k0, k1, counts)
    counts += low
    return counts


def flat_frame_counts(
    rate: float, dark: np.ndarray, rows: int, k0: np.uint32, k1: np.uint32, counts: np.ndarray | None = None
) -> np.ndarray:
    """:func:`flat_counts`, or where a dark mean is 10 or more (a hot pixel at a high temperature)
    :func:`poisson_counts` of the per-pixel means ``rate + D_j``."""
    if dark.shape[0] and float(dark.max()) >= PTRS_MIN_RATE:
        return poisson_counts(np.tile(rate + dark, rows), k0, k1, counts)
    return flat_counts(rate, dark, rows, k0, k1, counts)
