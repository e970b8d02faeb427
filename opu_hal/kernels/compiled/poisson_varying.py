"""Exact Poisson counts, one mean per count, from a caller's uniforms: the secure generator's privacy
counts at per-pixel means (a speckle anchor's counts). PTRS (Hoermann 1993; :mod:`.poisson`) as in
:mod:`.poisson_constant`, with each count's constants computed from its own mean.

The first round, where every count draws, can instead read its uniforms straight from the ChaCha20
keystream (:func:`first_round`): count ``i``'s two uniforms are the round's uniforms ``2 i`` and ``2 i + 1``,
words ``4 (i % 4) .. 4 (i % 4) + 3`` of block ``counter + i // 4`` (the layout of
:func:`opu_hal.kernels.compiled.chacha.uniforms`), computed in cache-sized tasks. The counts are the
same; the round's 16 bytes of uniforms per count are never written to a step-sized array (0.85x the
two-pass time, alternated in one process: ``python -m benchmarks.noise_draws``)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .chacha import LANES, UNIFORMS_PER_BLOCK, chunk_uniforms
from .elementary import log_positive
from .philox import unsettled, unsettled_pixels
from .poisson import LOG_FACTORIALS, PTRS_MIN_RATE, _ptrs_constants, _ptrs_test
from .poisson_constant import _stirling_log_gamma


@njit(inline="always", cache=True)
def _squeeze(lam, u, v):
    """PTRS's proposal ``k`` at ``lam`` from uniforms ``u``, ``v`` and whether the squeeze accepts it."""
    a, b, vr = _ptrs_constants(lam)
    u = u - 0.5
    us = 0.5 - abs(u)
    return math.floor((2.0 * a / us + b) * u + lam + 0.43), (us >= 0.07) & (v <= vr)


@njit(inline="always", cache=True)
def _exact(lam, u, v, k):
    """PTRS's exact test of the proposal ``k`` the squeeze left, on the same uniforms (as
    :func:`.poisson_constant._constant_exact`, at the count's own mean)."""
    a, b, _vr = _ptrs_constants(lam)
    us = 0.5 - abs(u - 0.5)
    top = LOG_FACTORIALS.shape[0] - 1.0
    tabled = LOG_FACTORIALS[int(min(max(k, 0.0), top))]
    log_k_factorial = tabled if k < 6.0 else _stirling_log_gamma(max(k, 6.0) + 1.0)
    return _ptrs_test(lam, log_positive(lam), a, b, k, us, v, log_k_factorial)


@njit(parallel=True, cache=True)
def _varying_squeeze(lams, uniforms_, pending, counts, settled):
    """One PTRS proposal for each ``pending`` count at its own mean, from two fresh uniforms each
    (``uniforms_[2 j]``, ``uniforms_[2 j + 1]``); settled where the squeeze accepts."""
    for j in prange(pending.shape[0]):
        i = pending[j]
        counts[i], settled[i] = _squeeze(lams[i], uniforms_[2 * j], uniforms_[2 * j + 1])


@njit(parallel=True, cache=True)
def _varying_exact(lams, uniforms_, pending, counts, settled):
    """The exact test for the proposals the squeeze left, on the same uniforms."""
    for j in prange(pending.shape[0]):
        i = pending[j]
        if not settled[i]:
            settled[i] = _exact(lams[i], uniforms_[2 * j], uniforms_[2 * j + 1], counts[i])


COUNTS_PER_TASK = 4096  # a first round's counts per parallel task (64 chunks of LANES blocks)


@njit(parallel=True, cache=True)
def first_round(key, counter, nonce, lams, counts, settled):
    """Round one of every count from the keystream ``key`` at ``nonce``, blocks ``counter ..`` (module
    docstring): a task's uniforms are :func:`opu_hal.kernels.compiled.chacha.uniforms` of its own blocks,
    computed into a cache-sized buffer (``chunk_uniforms`` from the task's first block), then the squeeze
    and the exact test where it failed, as :func:`_varying_squeeze` and :func:`_varying_exact`."""
    n = lams.shape[0]
    per_chunk = LANES * UNIFORMS_PER_BLOCK
    for task in prange((n + COUNTS_PER_TASK - 1) // COUNTS_PER_TASK):
        first, stop = task * COUNTS_PER_TASK, min(n, (task + 1) * COUNTS_PER_TASK)
        uniforms_ = np.empty(2 * (stop - first))
        x = np.empty((16, LANES), np.uint32)
        state = np.empty((16, LANES), np.uint32)
        task_counter = np.uint64(counter) + np.uint64(2 * first // UNIFORMS_PER_BLOCK)
        for chunk in range((uniforms_.shape[0] + per_chunk - 1) // per_chunk):
            chunk_uniforms(key, task_counter, nonce, np.uint32(0), chunk, uniforms_, x, state)
        for i in range(first, stop):
            counts[i], settled[i] = _squeeze(lams[i], uniforms_[2 * (i - first)], uniforms_[2 * (i - first) + 1])
        for i in range(first, stop):
            if not settled[i]:
                settled[i] = _exact(lams[i], uniforms_[2 * (i - first)], uniforms_[2 * (i - first) + 1], counts[i])


def varying_mean_counts(lams: np.ndarray, draw_uniforms, draw_first_round=None) -> np.ndarray:
    """One exact Poisson(``lams[i]``) count (int64) per mean, every mean finite and ``>= 10``, by PTRS
    on the uniforms ``draw_uniforms(m)`` returns: every round of every count takes two fresh uniforms
    (a round's pending counts draw together), so each count is PTRS on its own i.i.d. uniforms.
    ``draw_first_round(lams, counts, settled)``, where given, does round one in place of
    ``draw_uniforms(2 len(lams))`` and the round on them (:func:`first_round`, on the same blocks)."""
    lams = np.ascontiguousarray(lams, dtype=np.float64)
    if lams.size and not (np.isfinite(lams).all() and lams.min() >= PTRS_MIN_RATE):
        raise ValueError(f"varying_mean_counts needs finite means >= {PTRS_MIN_RATE}, got min {lams.min()}")
    counts = np.empty(lams.size)
    settled = np.zeros(lams.size, dtype=np.bool_)
    if draw_first_round is not None and lams.size:
        draw_first_round(lams, counts, settled)
        pending = unsettled_pixels(settled, np.empty(lams.size, np.int64))
    else:
        pending = np.arange(lams.size, dtype=np.int64)
    while pending.shape[0]:
        uniforms_ = draw_uniforms(2 * pending.shape[0])
        _varying_squeeze(lams, uniforms_, pending, counts, settled)
        _varying_exact(lams, uniforms_, pending, counts, settled)
        pending = unsettled(pending, settled)
    return counts.astype(np.int64)
