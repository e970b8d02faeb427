"""Exact Poisson counts, one mean per count, from a caller's uniforms: the secure generator's privacy
counts at per-pixel means (a speckle anchor's counts). PTRS (Hoermann 1993; :mod:`.poisson`) as in
:mod:`.poisson_constant`, with each count's constants computed from its own mean."""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .elementary import log_positive
from .philox import unsettled
from .poisson import LOG_FACTORIALS, PTRS_MIN_RATE, _ptrs_constants, _ptrs_test
from .poisson_constant import _stirling_log_gamma


@njit(parallel=True, cache=True)
def _varying_squeeze(lams, uniforms_, pending, counts, settled):
    """One PTRS proposal for each ``pending`` count at its own mean, from two fresh uniforms each
    (``uniforms_[2 j]``, ``uniforms_[2 j + 1]``); settled where the squeeze accepts."""
    for j in prange(pending.shape[0]):
        i = pending[j]
        lam = lams[i]
        a, b, vr = _ptrs_constants(lam)
        u = uniforms_[2 * j] - 0.5
        v = uniforms_[2 * j + 1]
        us = 0.5 - abs(u)
        counts[i] = math.floor((2.0 * a / us + b) * u + lam + 0.43)
        settled[i] = (us >= 0.07) & (v <= vr)


@njit(parallel=True, cache=True)
def _varying_exact(lams, uniforms_, pending, counts, settled):
    """The exact test for the proposals the squeeze left, on the same uniforms (as
    :func:`.poisson_constant._constant_exact`, at each count's own mean)."""
    top = LOG_FACTORIALS.shape[0] - 1.0
    for j in prange(pending.shape[0]):
        i = pending[j]
        if not settled[i]:
            lam = lams[i]
            a, b, _vr = _ptrs_constants(lam)
            u = uniforms_[2 * j] - 0.5
            v = uniforms_[2 * j + 1]
            us = 0.5 - abs(u)
            k = counts[i]
            tabled = LOG_FACTORIALS[int(min(max(k, 0.0), top))]
            log_k_factorial = tabled if k < 6.0 else _stirling_log_gamma(max(k, 6.0) + 1.0)
            settled[i] = _ptrs_test(lam, log_positive(lam), a, b, k, us, v, log_k_factorial)


def varying_mean_counts(lams: np.ndarray, draw_uniforms) -> np.ndarray:
    """One exact Poisson(``lams[i]``) count (int64) per mean, every mean finite and ``>= 10``, by PTRS
    on the uniforms ``draw_uniforms(m)`` returns: every round of every count takes two fresh uniforms
    (a round's pending counts draw together), so each count is PTRS on its own i.i.d. uniforms."""
    lams = np.ascontiguousarray(lams, dtype=np.float64)
    if lams.size and not (np.isfinite(lams).all() and lams.min() >= PTRS_MIN_RATE):
        raise ValueError(f"varying_mean_counts needs finite means >= {PTRS_MIN_RATE}, got min {lams.min()}")
    counts = np.empty(lams.size)
    settled = np.zeros(lams.size, dtype=np.bool_)
    pending = np.arange(lams.size, dtype=np.int64)
    while pending.shape[0]:
        uniforms_ = draw_uniforms(2 * pending.shape[0])
        _varying_squeeze(lams, uniforms_, pending, counts, settled)
        _varying_exact(lams, uniforms_, pending, counts, settled)
        pending = unsettled(pending, settled)
    return counts.astype(np.int64)
