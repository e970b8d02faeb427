"""Exact Poisson counts of one constant mean from a caller's uniforms: the secure generator's
privacy counts (PTRS of :mod:`.poisson`, its uniforms from the ChaCha20 keystream)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .elementary import log_positive
from .philox import unsettled
from .poisson import LOG_FACTORIALS, PTRS_MIN_RATE, _ptrs_constants, _ptrs_test, _stirling_series


@njit(inline="always", cache=True)
def _stirling_log_gamma(x):
    """``log Gamma(x)`` for x >= 7 by :func:`_stirling_series`, with the vectorizable log."""
    return _stirling_series(x) + (x - 0.5) * log_positive(x) - x


@njit(parallel=True, cache=True)
def _constant_squeeze(lam, uniforms_, pending, counts, settled):
    """One PTRS proposal at one mean ``lam >= 10`` for each ``pending`` value, from two fresh
    uniforms each (``uniforms_[2 j]``, ``uniforms_[2 j + 1]``); settled where the squeeze accepts."""
    a, b, vr = _ptrs_constants(lam)
    for j in prange(pending.shape[0]):
        i = pending[j]
        u = uniforms_[2 * j] - 0.5
        v = uniforms_[2 * j + 1]
        us = 0.5 - abs(u)
        counts[i] = math.floor((2.0 * a / us + b) * u + lam + 0.43)
        settled[i] = (us >= 0.07) & (v <= vr)


@njit(parallel=True, cache=True)
def _constant_exact(lam, uniforms_, pending, counts, settled):
    """The exact test for the proposals the squeeze left (``settled`` false), on the same uniforms;
    ``log k!`` from the table below 6 and the Stirling series past it (both computed, one kept)."""
    a, b, _vr = _ptrs_constants(lam)
    log_lam = log_positive(lam)
    top = LOG_FACTORIALS.shape[0] - 1.0
    for j in prange(pending.shape[0]):
        i = pending[j]
        if not settled[i]:
            u = uniforms_[2 * j] - 0.5
            v = uniforms_[2 * j + 1]
            us = 0.5 - abs(u)
            k = counts[i]
            tabled = LOG_FACTORIALS[int(min(max(k, 0.0), top))]
            log_k_factorial = tabled if k < 6.0 else _stirling_log_gamma(max(k, 6.0) + 1.0)
            settled[i] = _ptrs_test(lam, log_lam, a, b, k, us, v, log_k_factorial)


def constant_mean_counts(lam: float, n: int, draw_uniforms) -> np.ndarray:
    """``n`` exact Poisson(``lam``) counts (int64), ``lam >= 10``, by PTRS (Hoermann 1993) on the
    uniforms ``draw_uniforms(m)`` returns: every round of every value takes two fresh uniforms (a
    round's pending values draw together), so each count is PTRS on its own i.i.d. uniforms."""
    if not (math.isfinite(lam) and lam >= PTRS_MIN_RATE):
        raise ValueError(f"constant_mean_counts needs a finite mean >= {PTRS_MIN_RATE}, got {lam}")
    counts = np.empty(n)
    settled = np.zeros(n, dtype=np.bool_)
    pending = np.arange(n, dtype=np.int64)
    while pending.shape[0]:
        uniforms_ = draw_uniforms(2 * pending.shape[0])
        _constant_squeeze(lam, uniforms_, pending, counts, settled)
        _constant_exact(lam, uniforms_, pending, counts, settled)
        pending = unsettled(pending, settled)
    return counts.astype(np.int64)
