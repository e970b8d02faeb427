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
  about 99 % of the normals are settled there, in 16-block SIMD lanes;
- every further value normal ``i`` needs is a 64-bit pair read in order from its own substream, pair
  ``k % 8`` of block ``counter + i`` at nonce ``(nonce, 1 + k // 8)`` (as in the 64-bit kernel): a
  further proposal is the pair's first word, a uniform (the wedge's, the tail's) the pair's 53 bits.

So a call reserves ``n`` blocks (:func:`blocks_for`) whatever the rejections; no two values of any call
share a (block, nonce) pair, and a call's output is a function of the key and its first block alone.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .chacha import LANES, _rounds
from .chacha_normal import _lane_blocks, _next_pair, beyond_rectangle
from .normal import ziggurat_tables

WORDS_PER_BLOCK = 16  # first proposals per block
TASK_CHUNKS = 32  # chunks of 16 blocks (8192 normals) per parallel task
_K, W32, F32 = ziggurat_tables(bits=23)  # F32: the curve's values, the 64-bit tables' (bits scale k and w)
K32 = _K.astype(np.int64)  # the 23-bit thresholds
W32F = W32.astype(np.float32)  # the layer widths in float32: a first proposal is float32(rabs) * width


@njit(inline="always", cache=True)
def _proposal(word):
    """The layer, the sign and the 23-bit integer of one 32-bit word (numpy's float32 layout)."""
    bits = np.int64(word)
    return bits & 0xFF, ((bits >> 8) & 1) == 1, (bits >> 9) & 0x7FFFFF


@njit(cache=True)
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


@njit(parallel=True, cache=True)
def _normals(key, counter, nonce, out):
    """Every normal of ``out``: first proposals in float32 (those outside their rectangle listed), then
    the listed ones on their substreams, 16 first substream blocks side by side."""
    n = out.shape[0]
    per_chunk = LANES * WORDS_PER_BLOCK
    per_task = TASK_CHUNKS * per_chunk
    for task in prange((n + per_task - 1) // per_task):
        x = np.empty((16, LANES), np.uint32)
        state = np.empty((16, LANES), np.uint32)
        proposals = np.empty(per_chunk, np.uint32)
        pending = np.empty(per_task, np.int64)
        firsts = np.empty(per_task, np.uint32)
        m = 0
        for chunk in range(task * TASK_CHUNKS, min((task + 1) * TASK_CHUNKS, (n + per_chunk - 1) // per_chunk)):
            _rounds(key, counter, nonce, np.uint32(0), chunk * LANES, x, state)
            for lane in range(LANES):
                for word in range(WORDS_PER_BLOCK):
                    proposals[lane * WORDS_PER_BLOCK + word] = np.uint32(x[word, lane] + state[word, lane])
            start = chunk * per_chunk
            for j in range(min(per_chunk, n - start)):
                layer, negative, rabs = _proposal(proposals[j])
                y = np.float32(rabs) * W32F[layer]
                out[start + j] = -y if negative else y
                if rabs >= K32[layer]:  # about 1 %: listed, settled below
                    pending[m], firsts[m] = start + j, proposals[j]
                    m += 1
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
                out[pending[j]] = _settle(key, counter, nonce, pending[j], firsts[j], words)


def blocks_for(n: int) -> int:
    """Blocks a call of ``n`` normals reserves: one substream per normal (module docstring)."""
    return max(n, 1)


def standard_normals(key: np.ndarray, counter: int, nonce: int, out: np.ndarray) -> np.ndarray:
    """Fill ``out`` (float32) with standard normals from blocks ``counter .. counter + blocks_for(len(out)) - 1``
    of the keystream ``key`` (eight uint32 words) at ``nonce``."""
    if out.dtype != np.float32:
        raise ValueError(f"the 32-bit ziggurat fills float32 arrays, got {out.dtype}")
    _normals(key, np.uint64(counter), np.uint32(nonce), out)
    return out
