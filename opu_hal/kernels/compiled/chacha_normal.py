"""Standard normals on the CPU from the compiled ChaCha20 keystream: the privacy normals.

Marsaglia and Tsang's ziggurat ("The ziggurat method for generating random variables", J. Stat.
Software 5, 2000) in numpy's 256-layer, 52-bit form (the tables of :mod:`opu_hal.kernels.compiled.normal`;
the tail by Marsaglia 1964), on the counter-mode ChaCha20 keystream of RFC 8439
(:mod:`opu_hal.kernels.compiled.chacha`), under one nonce word ``nonce`` and a call's reserved blocks
``counter .. counter + n - 1``:

- normal ``i``'s first proposal is the 64-bit pair ``i % 8`` of block ``counter + i // 8`` with
  nonce ``(nonce, 0)``: about 99 % of the normals are settled there, in 16-block SIMD lanes;
- every further 64-bit value normal ``i`` needs (the wedge's uniform, the tail's uniforms, later
  proposals) is read in order from its own substream: pair ``k % 8`` of block ``counter + i`` with
  nonce ``(nonce, 1 + k // 8)``.

So a call reserves ``n`` blocks (:func:`blocks_for`), whatever the rejections: no two values of
any call share a (block, nonce) pair, and a call's output is a function of the key and its first
block alone (a checkpoint replays it).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .chacha import LANES, UNIFORMS_PER_BLOCK, _rounds, set_lane, twenty_rounds
from .normal import ZIGGURAT_F, ZIGGURAT_K, ZIGGURAT_R, ZIGGURAT_W
from .philox import uniform53

TASK_CHUNKS = 64  # chunks of 16 blocks (8192 normals) per parallel task
RECTANGLE_K = ZIGGURAT_K.astype(np.int64)  # the 52-bit thresholds, signed (they are below 2^52)


@njit(inline="always", cache=True)
def _proposal(hi, lo):
    """The layer, the sign and the 52-bit integer of one 64-bit value (numpy's layout)."""
    bits = (np.uint64(hi) << np.uint64(32)) | np.uint64(lo)
    layer = np.int64(bits & np.uint64(0xFF))
    negative = ((bits >> np.uint64(8)) & np.uint64(1)) == np.uint64(1)
    rabs = np.int64((bits >> np.uint64(9)) & np.uint64(0x000FFFFFFFFFFFFF))  # < 2^52: exact, fast to convert
    return layer, negative, rabs


@njit(cache=True)
def _block(key, block, nonce_lo, nonce_hi, words):
    """The sixteen keystream words of one block (RFC 8439 section 2.3) into ``words``."""
    x = np.empty((16, LANES), np.uint32)
    state = np.empty((16, LANES), np.uint32)
    _rounds(key, block, nonce_lo, nonce_hi, 0, x, state)
    for word in range(16):
        words[word] = np.uint32(x[word, 0] + state[word, 0])


@njit(cache=True)
def _lane_blocks(key, blocks, count, nonce_lo, nonce_hi, words):
    """Keystream words of ``count <= LANES`` blocks ``blocks[:count]`` (one nonce) into
    ``words`` (16 x LANES), side by side."""
    x = np.empty((16, LANES), np.uint32)
    state = np.empty((16, LANES), np.uint32)
    for lane in range(LANES):
        set_lane(state, lane, key, blocks[min(lane, count - 1)], nonce_lo, nonce_hi)
    x[:, :] = state
    twenty_rounds(x)
    for lane in range(LANES):
        for word in range(16):
            words[word, lane] = np.uint32(x[word, lane] + state[word, lane])


@njit(inline="always", cache=True)
def _next_pair(key, block, nonce, substream_block, words, pair):
    """The next two words of a normal's substream, reading its next block when ``words`` is used up;
    returns them with the updated position ``(pair, substream_block)``."""
    if pair == UNIFORMS_PER_BLOCK:
        substream_block += np.uint32(1)
        _block(key, block, nonce, substream_block, words)
        pair = 0
    return words[2 * pair], words[2 * pair + 1], pair + 1, substream_block


@njit(inline="always", cache=True)
def beyond_rectangle(key, block, nonce, substream_block, words, pair, layer, x):
    """After a proposal ``x`` outside layer ``layer``'s rectangle, on the normal's substream: the wedge's
    test, or a draw from the tail beyond r (Marsaglia 1964, two uniforms a try). Returns ``(accepted,
    |value|, pair, substream_block)``; a rejected wedge point asks for a new proposal."""
    hi, lo, pair, substream_block = _next_pair(key, block, nonce, substream_block, words, pair)
    u = uniform53(hi, lo)
    if layer == 0:
        while True:
            hi, lo, pair, substream_block = _next_pair(key, block, nonce, substream_block, words, pair)
            v = uniform53(hi, lo)
            xx = -math.log1p(-u) / ZIGGURAT_R
            yy = -math.log1p(-v)
            if yy + yy > xx * xx:
                return True, ZIGGURAT_R + xx, pair, substream_block
            hi, lo, pair, substream_block = _next_pair(key, block, nonce, substream_block, words, pair)
            u = uniform53(hi, lo)
    accepted = (ZIGGURAT_F[layer - 1] - ZIGGURAT_F[layer]) * u + ZIGGURAT_F[layer] < math.exp(-0.5 * x * x)
    return accepted, x, pair, substream_block


@njit(cache=True)
def _settle(key, counter, nonce, index, first_hi, first_lo, words):
    """Normal ``index`` after a first proposal outside its rectangle, reading its substream
    (module docstring) whose first block's words are ``words`` (16)."""
    block = np.uint64(counter) + np.uint64(index)
    substream_block = np.uint32(1)
    pair = 0
    hi, lo = first_hi, first_lo
    while True:
        layer, negative, rabs = _proposal(hi, lo)
        x = rabs * ZIGGURAT_W[layer]
        if rabs < RECTANGLE_K[layer]:
            return -x if negative else x
        accepted, x, pair, substream_block = beyond_rectangle(key, block, nonce, substream_block, words, pair, layer, x)
        if accepted:
            return -x if negative else x
        hi, lo, pair, substream_block = _next_pair(key, block, nonce, substream_block, words, pair)


@njit(parallel=True, cache=True)
def _normals(key, counter, nonce, out):
    """Every normal of ``out``, :data:`TASK_CHUNKS` chunks of 16 blocks per task: first the
    proposals (branch-free; those outside their rectangle are listed with their 64 bits), then the
    listed ones on their substreams, 16 first substream blocks side by side."""
    n = out.shape[0]
    per_chunk = LANES * UNIFORMS_PER_BLOCK
    per_task = TASK_CHUNKS * per_chunk
    for task in prange((n + per_task - 1) // per_task):
        x = np.empty((16, LANES), np.uint32)
        state = np.empty((16, LANES), np.uint32)
        pending = np.empty(per_task, np.int64)
        his = np.empty(per_task, np.uint32)
        los = np.empty(per_task, np.uint32)
        m = 0
        for chunk in range(task * TASK_CHUNKS, min((task + 1) * TASK_CHUNKS, (n + per_chunk - 1) // per_chunk)):
            _rounds(key, counter, nonce, np.uint32(0), chunk * LANES, x, state)
            start = chunk * per_chunk
            for lane in range(LANES):
                for pair in range(UNIFORMS_PER_BLOCK):
                    i = start + lane * UNIFORMS_PER_BLOCK + pair
                    if i < n:
                        hi = np.uint32(x[2 * pair, lane] + state[2 * pair, lane])
                        lo = np.uint32(x[2 * pair + 1, lane] + state[2 * pair + 1, lane])
                        layer, negative, rabs = _proposal(hi, lo)
                        value = rabs * ZIGGURAT_W[layer]
                        out[i] = -value if negative else value
                        pending[m], his[m], los[m] = i, hi, lo
                        m += rabs >= RECTANGLE_K[layer]
        blocks = np.empty(LANES, np.uint64)
        lanes = np.empty((16, LANES), np.uint32)
        words = np.empty(16, np.uint32)
        for group in range(0, m, LANES):
            count = min(LANES, m - group)
            for lane in range(count):
                blocks[lane] = np.uint64(counter) + np.uint64(pending[group + lane])
            _lane_blocks(key, blocks, count, nonce, np.uint32(1), lanes)
            for lane in range(count):
                for word in range(16):
                    words[word] = lanes[word, lane]
                j = group + lane
                out[pending[j]] = _settle(key, counter, nonce, pending[j], his[j], los[j], words)


def blocks_for(n: int) -> int:
    """Blocks a call of ``n`` normals reserves: one substream per normal (module docstring)."""
    return max(n, 1)


def standard_normals(key: np.ndarray, counter: int, nonce: int, out: np.ndarray) -> np.ndarray:
    """Fill ``out`` (float32 or float64) with standard normals from blocks ``counter ..
    counter + blocks_for(len(out)) - 1`` of the keystream ``key`` (eight uint32 words) at ``nonce``."""
    _normals(key, np.uint64(counter), np.uint32(nonce), out)
    return out
