"""Philox4x32-10 counters and the helpers every compiled pass shares.

Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC 2011)
maps a 128-bit counter and a 64-bit key to 128 random bits, so a pixel's uniforms are a pure function
of ``(key, pixel, round)``: any pass can draw them, in any order, on any thread. Same rounds and
constants as Triton's ``tl.philox`` (the GPU kernel's counters).
"""

from __future__ import annotations

import threading

import numba
import numpy as np
import torch
from numba import njit

_M0 = np.uint64(0xD2511F53)
_M1 = np.uint64(0xCD9E8D57)
_W0 = np.uint32(0x9E3779B9)
_W1 = np.uint32(0xBB67AE85)
_LOW32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)
CACHED_BYTES = 16 << 20  # workspace arrays up to this size (2M float64 values) are kept between frames


@njit(inline="always", cache=True)
def philox4x32(k0, k1, c0, c1, c2, c3):
    """Philox4x32-10 of counter ``(c0, c1, c2, c3)`` under key ``(k0, k1)`` (all uint32)."""
    for _ in range(10):
        p0 = np.uint64(c0) * _M0
        p1 = np.uint64(c2) * _M1
        n0 = np.uint32(p1 >> _SHIFT32) ^ c1 ^ k0
        n2 = np.uint32(p0 >> _SHIFT32) ^ c3 ^ k1
        c1 = np.uint32(p1 & _LOW32)
        c3 = np.uint32(p0 & _LOW32)
        c0 = n0
        c2 = n2
        k0 = np.uint32(k0 + _W0)
        k1 = np.uint32(k1 + _W1)
    return c0, c1, c2, c3


@njit(inline="always", cache=True)
def uniform53(hi, lo):
    """A float64 uniform in [0, 1) from two uint32 words (numpy's 53-bit construction)."""
    return ((hi >> np.uint32(5)) * 67108864.0 + (lo >> np.uint32(6))) * (1.0 / 9007199254740992.0)


@njit(cache=True)
def unsettled(pending, settled):
    """The entries of ``pending`` whose pixel is not ``settled``, compacted in place (branch-free)."""
    m = 0
    for i in pending:
        pending[m] = i
        m += not settled[i]
    return pending[:m]


@njit(cache=True)
def unsettled_pixels(settled, out):
    """The pixels where ``settled`` is false, in order, written into ``out`` (int32 for a frame's pixels,
    int64 for a draw's counts)."""
    m = 0
    for i in range(settled.shape[0]):
        out[m] = i
        m += not settled[i]
    return out[:m]


def key_words(generator: torch.Generator) -> tuple[np.uint32, np.uint32]:
    """A 64-bit Philox key drawn from ``generator``, as its two 32-bit words."""
    key = int(torch.randint(0, 2**62, (1,), generator=generator, dtype=torch.int64))
    return np.uint32(key & 0xFFFFFFFF), np.uint32(key >> 32)


class Workspace(threading.local):
    """Arrays reused from frame to frame (a fresh one costs its page faults, about a quarter of a
    millisecond per 2 MB here), one set per thread; arrays above :data:`CACHED_BYTES` are not kept."""

    def __init__(self) -> None:
        self._arrays: dict[str, np.ndarray] = {}

    def array(self, name: str, n: int, dtype: type) -> np.ndarray:
        kept = self._arrays.get(name)
        if kept is not None and kept.shape[0] >= n and kept.dtype == dtype:
            return kept[:n]
        fresh: np.ndarray = np.empty(n, dtype=dtype)
        if fresh.nbytes <= CACHED_BYTES:
            self._arrays[name] = fresh
        return fresh


WORKSPACE = Workspace()


class compute_threads:
    """Numba's threads follow torch's intra-op thread count for the duration of a call, and torch's count
    is the same after it: the first parallel kernel of a process starts Numba's OpenMP layer, which sets
    the OpenMP runtime torch shares to Numba's full count (a run told ``OMP_NUM_THREADS=1`` went on with
    two torch threads, so two such runs side by side each waited for the other's cores)."""

    def __enter__(self) -> None:
        self._torch, self._before = torch.get_num_threads(), numba.get_num_threads()
        most = numba.config.NUMBA_NUM_THREADS  # type: ignore[attr-defined]  # set when numba.config loads
        numba.set_num_threads(max(1, min(self._torch, most)))

    def __exit__(self, *exc: object) -> None:
        numba.set_num_threads(self._before)
        if torch.get_num_threads() != self._torch:
            torch.set_num_threads(self._torch)
