"""Standard normals on the CPU, compiled: Marsaglia and Tsang's ziggurat ("The ziggurat method for
generating random variables", J. Stat. Software 5, 2000) in numpy's 256-layer, 52-bit form
(``random_standard_normal``), on Philox counters ``(pixel, attempt, 1, 0)`` (the tail's uniforms at
``(pixel, attempt, 1, 1 + t)``).

The first attempt of every pixel runs branch-free and settles the ~99 % of points inside their
layer's rectangle; the rest (wedges and the tail beyond r) run one pixel at a time.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .philox import WORKSPACE, philox4x32, uniform53, unsettled_pixels

ZIGGURAT_R = 3.6541528853610088  # where the tail starts
ZIGGURAT_V = 0.00492867323399  # every layer's area
NORMAL_WORD = 1  # the third counter word of the normals' Philox counters


def ziggurat_tables(layers: int = 256, r: float = ZIGGURAT_R, v: float = ZIGGURAT_V, bits: int = 52):
    """``(k, w, f)``: ``k[i]`` the ``bits``-bit threshold under which layer ``i``'s point lies inside the
    curve, ``w[i]`` the layer's width per unit of the ``bits``-bit integer, ``f[i] = exp(-x_i^2 / 2)``;
    layer 0 is the base strip with the tail. Marsaglia and Tsang's recursion, in float64."""
    scale = 2.0**bits
    base = v / math.exp(-0.5 * r * r)
    k = np.zeros(layers, dtype=np.uint64)
    w, f = np.zeros(layers), np.zeros(layers)
    k[0], w[0], f[0] = int(r / base * scale), base / scale, 1.0
    w[-1], f[-1] = r / scale, math.exp(-0.5 * r * r)
    x = previous = r
    for i in range(layers - 2, 0, -1):
        x = math.sqrt(-2.0 * math.log(v / x + math.exp(-0.5 * x * x)))
        k[i + 1] = int(x / previous * scale)
        previous = x
        f[i], w[i] = math.exp(-0.5 * x * x), x / scale
    return k, w, f


ZIGGURAT_K, ZIGGURAT_W, ZIGGURAT_F = ziggurat_tables()


@njit(inline="always", cache=True)
def _proposal(k0, k1, pixel, attempt):
    """One ziggurat proposal: the layer, the sign and the 52-bit integer of 64 random bits, and a
    uniform."""
    r0, r1, r2, r3 = philox4x32(k0, k1, pixel, attempt, np.uint32(NORMAL_WORD), np.uint32(0))
    bits = (np.uint64(r0) << np.uint64(32)) | np.uint64(r1)
    layer = np.int64(bits & np.uint64(0xFF))
    negative = ((bits >> np.uint64(8)) & np.uint64(1)) == np.uint64(1)
    rabs = (bits >> np.uint64(9)) & np.uint64(0x000FFFFFFFFFFFFF)
    return layer, negative, rabs, uniform53(r2, r3)


@njit(cache=True)
def _tail(k0, k1, pixel, attempt):
    """A draw beyond ``r`` (Marsaglia 1964), on the attempt's tail counters."""
    t = np.uint32(1)
    while True:
        q0, q1, q2, q3 = philox4x32(k0, k1, pixel, attempt, np.uint32(NORMAL_WORD), t)
        xx = -math.log1p(-uniform53(q0, q1)) / ZIGGURAT_R
        yy = -math.log1p(-uniform53(q2, q3))
        if yy + yy > xx * xx:
            return ZIGGURAT_R + xx
        t += np.uint32(1)


@njit(cache=True)
def ziggurat_normal(k0, k1, pixel):
    """Pixel ``pixel``'s standard normal, attempt by attempt."""
    attempt = np.uint32(0)
    while True:
        layer, negative, rabs, u = _proposal(k0, k1, pixel, attempt)
        x = rabs * ZIGGURAT_W[layer]
        if rabs < ZIGGURAT_K[layer]:
            return -x if negative else x
        if layer == 0:
            x = _tail(k0, k1, pixel, attempt)
            return -x if negative else x
        if (ZIGGURAT_F[layer - 1] - ZIGGURAT_F[layer]) * u + ZIGGURAT_F[layer] < math.exp(-0.5 * x * x):
            return -x if negative else x
        attempt += np.uint32(1)


@njit(parallel=True, cache=True)
def _first_attempt(k0, k1, out, settled):
    for i in prange(out.shape[0]):
        layer, negative, rabs, _ = _proposal(k0, k1, np.uint32(i), np.uint32(0))
        x = rabs * ZIGGURAT_W[layer]
        out[i] = -x if negative else x
        settled[i] = rabs < ZIGGURAT_K[layer]


@njit(parallel=True, cache=True)
def _rest(pending, k0, k1, out):
    for j in prange(pending.shape[0]):
        out[pending[j]] = ziggurat_normal(k0, k1, np.uint32(pending[j]))


def standard_normals(n: int, k0: np.uint32, k1: np.uint32, out: np.ndarray | None = None) -> np.ndarray:
    """``n`` standard normals (float64), entry ``i`` a function of the key and ``i`` alone."""
    out = np.empty(n) if out is None else out
    settled = WORKSPACE.array("settled", n, np.bool_)
    _first_attempt(k0, k1, out, settled)
    _rest(unsettled_pixels(settled, WORKSPACE.array("small", n, np.int32)), k0, k1, out)
    return out
