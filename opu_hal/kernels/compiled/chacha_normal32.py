"""Float32 standard normals on the CPU from the compiled ChaCha20 keystream, 32 bits a proposal.

The ziggurat of :mod:`opu_hal.kernels.compiled.chacha_normal` (Marsaglia and Tsang, J. Stat. Software
5, 2000; 256 layers, the tail by Marsaglia 1964) in numpy's float32 form (``random_standard_normal_f``):
a proposal is ONE 32-bit word, 8 bits of layer, 1 of sign and a 23-bit integer, so a ChaCha20 block
(RFC 8439) gives sixteen first proposals instead of eight and a draw reads half the keystream. The
23-bit integer gives each layer 2^23 values, as many as a float32 mantissa holds below its leading
bit. A point inside its layer's rectangle (about 99 %) is ``float32(rabs) * w`` in float32, with ``w``
the layer's width rounded to float32 (numpy's arithmetic); the wedges and the tail are computed in
float64 and rounded once to float32. The layout, under one nonce word
``nonce`` and a call's reserved blocks ``counter .. counter + n - 1``:

- normal ``i``'s first proposal is word ``i % 16`` of block ``counter + i // 16`` at nonce ``(nonce, 0)``;
  about 99 % of the normals are settled there, in one pass the compiler vectorizes (the keystream's
  16-block SIMD lanes first, then the layer tables read by gathers);
- every further value normal ``i`` needs is a 64-bit pair read in order from its own substream, pair
  ``k % 8`` of block ``counter + i`` at nonce ``(nonce, 1 + k // 8)`` (as in the 64-bit kernel): a
  further proposal is the pair's first word, a uniform (the wedge's, the tail's) the pair's 53 bits.

So a call reserves ``n`` blocks (:func:`blocks_for`) whatever the rejections; no two values of any call
share a (block, nonce) pair, and a call's output is a function of the key and its first block alone.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .chacha import LANES, chunk_words
from .chacha_normal import _lane_blocks, _next_pair, beyond_rectangle
from .normal import ziggurat_tables

WORDS_PER_BLOCK = 16  # first proposals per block
PER_TASK = 8192  # normals per parallel task
_K, W32, F32 = ziggurat_tables(bits=23)  # F32: the curve's values, the 64-bit tables' (bits scale k and w)
K32 = _K.astype(np.int64)  # the 23-bit thresholds
K32_INT = _K.astype(np.int32)  # the same, as the 32-bit integers the vectorized first pass compares
W32F = W32.astype(np.float32)  # the layer widths in float32: a first proposal is float32(rabs) * width


@njit(inline="always", cache=True)
def _proposal(word):
    """The layer, the sign and the 23-bit integer of one 32-bit word (numpy's float32 layout)."""
    bits = np.int64(word)
    return bits & 0xFF, ((bits >> 8) & 1) == 1, (bits >> 9) & 0x7FFFFF


@njit(inline="always", cache=True)
def _settle(key, counter, nonce, index, first, words):
    """Normal ``index`` after a first proposal ``first`` outside its rectangle, reading its substream
    (module docstring) whose first block's words are ``words`` (16)."""
    block = np.uint64(counter) + np.uint64(index)
    substream_block = np.uint32(1)
    pair = 0
    word = first
    while True:
        layer, negative, rabs = _proposal(word)
        x = rabs * W32[layer]
        if rabs < K32[layer]:
            return -x if negative else x
        accepted, x, pair, substream_block = beyond_rectangle(key, block, nonce, substream_block, words, pair, layer, x)
        if accepted:
            return -x if negative else x
        word, _lo, pair, substream_block = _next_pair(key, block, nonce, substream_block, words, pair)  # a new proposal


@njit(inline="always", cache=True)
def _first_proposals(words, out, outside):
    """Every normal of ``out`` from its first proposal in ``words``, in float32, and ``outside`` true
    where that proposal falls outside its layer's rectangle (about 1 %): written without branches on
    32-bit integers, so the compiler vectorizes it (the table reads become gathers)."""
    for i in range(words.shape[0]):
        word = words[i]
        layer = np.int32(word & np.uint32(0xFF))
        rabs = np.int32(word >> np.uint32(9))
        y = np.float32(rabs) * W32F[layer]
        out[i] = -y if (word >> np.uint32(8)) & np.uint32(1) else y
        outside[i] = rabs >= K32_INT[layer]


@njit(inline="always", cache=True)
def _substream_blocks(key, counter, nonce, first, listed):
    """The first substream block (16 words) of each normal ``first + listed[j]``, 16 side by side."""
    blocks = np.empty(LANES, np.uint64)
    lanes = np.empty((16, LANES), np.uint32)
    substreams = np.empty((listed.shape[0], 16), np.uint32)
    for group in range(0, listed.shape[0], LANES):
        count = min(LANES, listed.shape[0] - group)
        for lane in range(count):
            blocks[lane] = np.uint64(counter) + np.uint64(first + listed[group + lane])
        _lane_blocks(key, blocks, count, nonce, np.uint32(1), lanes)
        for lane in range(count):
            for word in range(16):
                substreams[group + lane, word] = lanes[word, lane]
    return substreams


@njit(inline="always", cache=True)
def _settle_outside(key, counter, nonce, first, words, out, outside):
    """The normals ``first + i`` with ``outside[i]`` on their substreams (``words``: their first proposals)."""
    listed = np.flatnonzero(outside)
    substreams = _substream_blocks(key, counter, nonce, first, listed)
    for j in range(listed.shape[0]):
        i = listed[j]
        out[i] = _settle(key, counter, nonce, first + i, words[i], substreams[j])


@njit(inline="always", cache=True)
def _task_words(key, counter, nonce, start, words):
    """The first proposals of normals ``start ..`` (``start`` a multiple of 16) into ``words``: the keystream
    at nonce ``(nonce, 0)`` from block ``counter + start / 16`` on."""
    x = np.empty((16, LANES), np.uint32)
    state = np.empty((16, LANES), np.uint32)
    task_counter = np.uint64(counter) + np.uint64(start // WORDS_PER_BLOCK)
    per_chunk = LANES * WORDS_PER_BLOCK
    for chunk in range((words.shape[0] + per_chunk - 1) // per_chunk):
        chunk_words(key, task_counter, nonce, np.uint32(0), chunk, words, x, state)


@njit(inline="always", cache=True)
def _task(key, counter, nonce, out, task):
    """The normals of task ``task`` (:data:`PER_TASK` of ``out``), with its keystream words in a buffer
    of its own (small enough to stay in cache)."""
    start, stop = task * PER_TASK, min(out.shape[0], (task + 1) * PER_TASK)
    words = np.empty(stop - start, np.uint32)
    _task_words(key, counter, nonce, start, words)
    outside = np.empty(stop - start, np.bool_)
    _first_proposals(words, out[start:stop], outside)
    _settle_outside(key, counter, nonce, start, words, out[start:stop], outside)


@njit(parallel=True, cache=True)
def _normals(key, counter, nonce, out):
    """Every normal of ``out`` (module docstring), in parallel tasks."""
    for task in prange((out.shape[0] + PER_TASK - 1) // PER_TASK):
        _task(key, counter, nonce, out, task)


@njit(cache=True)
def _serial_normals(key, counter, nonce, out):
    """The same values on one thread (per-step keyed draws: on a loaded machine, the wait for a
    second thread costs more than it saves)."""
    for task in range((out.shape[0] + PER_TASK - 1) // PER_TASK):
        _task(key, counter, nonce, out, task)


def blocks_for(n: int) -> int:
    """Blocks a call of ``n`` normals reserves: one substream per normal (module docstring)."""
    return max(n, 1)


def standard_normals(key: np.ndarray, counter: int, nonce: int, out: np.ndarray, parallel: bool = True) -> np.ndarray:
    """Fill ``out`` (float32) with standard normals from blocks ``counter .. counter + blocks_for(len(out)) - 1``
    of the keystream ``key`` (eight uint32 words) at ``nonce``; ``parallel=False``: the same values on
    one thread."""
    if out.dtype != np.float32:
        raise ValueError(f"the 32-bit ziggurat fills float32 arrays, got {out.dtype}")
    (_normals if parallel else _serial_normals)(key, np.uint64(counter), np.uint32(nonce), out)
    return out
