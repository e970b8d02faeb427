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

The ~1.5 % of normals whose first proposal falls outside its rectangle are listed, their first substream
blocks computed 16 side by side, and a second branch-free pass settles about 99 % of them (the wedge's
test accepts, or it rejects and the next proposal lies inside its rectangle); the rest (the tail, a
second proposal outside) are settled one at a time. Each path gives the sequential algorithm's value.

So a call reserves ``n`` blocks (:func:`blocks_for`) whatever the rejections; no two values of any call
share a (block, nonce) pair, and a call's output is a function of the key and its first block alone.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .chacha import LANES, chunk_words, set_lane, twenty_rounds
from .chacha_normal import _next_pair, beyond_rectangle
from .normal import ziggurat_tables
from .philox import uniform53

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
def _listed(outside, listed):
    """The indices of the true entries of ``outside`` (its length a multiple of 8) into ``listed``;
    returns their count. Eight flags are read as one word and words of none skipped (about 89 % of
    them at 1.5 % outside), where ``np.flatnonzero`` cost a fifth of a call."""
    flags = outside.view(np.uint64)
    m = 0
    for w in range(flags.shape[0]):
        if flags[w] != 0:
            for i in range(8 * w, 8 * w + 8):
                listed[m] = i
                m += outside[i]
    return m


@njit(inline="always", cache=True)
def _substream_blocks(key, counter, nonce, first, listed, substreams, x, state):
    """The first substream block (16 words) of each normal ``first + listed[j]`` into ``substreams[j]``,
    16 blocks side by side (``x``, ``state``: ``(16, LANES)`` scratch)."""
    for group in range(0, listed.shape[0], LANES):
        count = min(LANES, listed.shape[0] - group)
        for lane in range(LANES):
            normal = first + listed[group + min(lane, count - 1)]
            set_lane(state, lane, key, np.uint64(counter) + np.uint64(normal), nonce, np.uint32(1))
        x[:, :] = state
        twenty_rounds(x)
        for lane in range(count):
            for word in range(16):
                substreams[group + lane, word] = np.uint32(x[word, lane] + state[word, lane])


@njit(inline="always", cache=True)
def _second_pass(words, listed, substreams, out, unsettled):
    """What :func:`_settle` gives every listed normal whose wedge test (substream pair 0) accepts, or
    whose wedge rejects and whose next proposal (word 0 of pair 1) lies in its rectangle: about 99 % of
    them, without branches. ``unsettled[j]`` is true for the rest (those and the tail's) and their
    ``out`` entry is to be overwritten."""
    for j in range(listed.shape[0]):
        word, second = words[listed[j]], substreams[j, 2]
        layer, rabs = np.int64(word & np.uint32(0xFF)), np.int64(word >> np.uint32(9))
        layer2, rabs2 = np.int64(second & np.uint32(0xFF)), np.int64(second >> np.uint32(9))
        x = rabs * W32[layer]
        u = uniform53(substreams[j, 0], substreams[j, 1])
        accepted = (F32[max(layer - 1, 0)] - F32[layer]) * u + F32[layer] < math.exp(-0.5 * x * x)
        value = x if accepted else rabs2 * W32[layer2]
        out[listed[j]] = -value if ((word if accepted else second) >> np.uint32(8)) & np.uint32(1) else value
        unsettled[j] = (layer == 0) | (~accepted & (rabs2 >= K32[layer2]))


@njit(inline="always", cache=True)
def _settle_outside(key, counter, nonce, first, words, out, outside, x, state):
    """The normals ``first + i`` with ``outside[i]`` (``words``: their first proposals): the branch-free
    second pass, then :func:`_settle` for the few it leaves."""
    listed = np.empty(outside.shape[0], np.int64)
    listed = listed[: _listed(outside, listed)]
    substreams = np.empty((listed.shape[0], 16), np.uint32)
    _substream_blocks(key, counter, nonce, first, listed, substreams, x, state)
    unsettled = np.empty(listed.shape[0], np.bool_)
    _second_pass(words, listed, substreams, out, unsettled)
    for j in range(listed.shape[0]):
        if unsettled[j]:
            out[listed[j]] = _settle(key, counter, nonce, first + listed[j], words[listed[j]], substreams[j])


@njit(inline="always", cache=True)
def _task_words(key, counter, nonce, start, words, x, state):
    """The first proposals of normals ``start ..`` (``start`` a multiple of 16) into ``words``: the keystream
    at nonce ``(nonce, 0)`` from block ``counter + start / 16`` on."""
    task_counter = np.uint64(counter) + np.uint64(start // WORDS_PER_BLOCK)
    per_chunk = LANES * WORDS_PER_BLOCK
    for chunk in range((words.shape[0] + per_chunk - 1) // per_chunk):
        chunk_words(key, task_counter, nonce, np.uint32(0), chunk, words, x, state)


@njit(inline="always", cache=True)
def _task(key, counter, nonce, out, task, x, state):
    """The normals of task ``task`` (:data:`PER_TASK` of ``out``), with its keystream words in a buffer
    of its own (small enough to stay in cache; ``x``, ``state``: ``(16, LANES)`` scratch)."""
    start, stop = task * PER_TASK, min(out.shape[0], (task + 1) * PER_TASK)
    words = np.empty(stop - start, np.uint32)
    _task_words(key, counter, nonce, start, words, x, state)
    outside = np.zeros((stop - start + 7) // 8 * 8, np.bool_)  # padded to whole words for _listed
    _first_proposals(words, out[start:stop], outside)
    _settle_outside(key, counter, nonce, start, words, out[start:stop], outside, x, state)


@njit(parallel=True, cache=True)
def _normals(key, counter, nonce, out):
    """Every normal of ``out`` (module docstring), in parallel tasks."""
    for task in prange((out.shape[0] + PER_TASK - 1) // PER_TASK):
        _task(key, counter, nonce, out, task, np.empty((16, LANES), np.uint32), np.empty((16, LANES), np.uint32))


@njit(cache=True)
def _serial_normals(key, counter, nonce, out):
    """The same values on one thread (per-step keyed draws: on a loaded machine, the wait for a
    second thread costs more than it saves)."""
    x, state = np.empty((16, LANES), np.uint32), np.empty((16, LANES), np.uint32)
    for task in range((out.shape[0] + PER_TASK - 1) // PER_TASK):
        _task(key, counter, nonce, out, task, x, state)


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
