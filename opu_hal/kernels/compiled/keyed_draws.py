"""The private samplers' draws, compiled and on one thread (:mod:`opu_hal.randomness.keyed_stream`):
a batch needs a few thousand values, too few to repay waking a second thread (on a loaded machine,
the wait for it costs milliseconds).

- :func:`serial_uniforms`: :func:`opu_hal.kernels.compiled.chacha.uniforms`'s values, serially.
- :func:`partial_shuffle`: the front of a Fisher-Yates shuffle driven by given uniform offsets.
- :func:`prefix_bernoulli`: Poisson subsampling's inclusions, each decided on a 16-bit prefix of its uniform.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .chacha import LANES, UNIFORMS_PER_BLOCK, chunk_uniforms, chunk_words


@njit(cache=True)
def serial_uniforms(key, counter, nonce_lo, nonce_hi, out):
    """``len(out)`` uniforms in [0, 1) from blocks ``counter, counter + 1, ...``, the layout of
    :func:`opu_hal.kernels.compiled.chacha.uniforms`: uniform ``i`` is words ``2 (i % 8)``,
    ``2 (i % 8) + 1`` of block ``counter + i // 8``."""
    per_chunk = LANES * UNIFORMS_PER_BLOCK
    x = np.empty((16, LANES), np.uint32)
    state = np.empty((16, LANES), np.uint32)
    for chunk in range((out.shape[0] + per_chunk - 1) // per_chunk):
        chunk_uniforms(key, counter, nonce_lo, nonce_hi, chunk, out, x, state)
    return out


@njit(cache=True)
def partial_shuffle(n, offsets, out):
    """The first ``len(offsets)`` entries of the Fisher-Yates shuffle of ``range(n)`` (Knuth,
    TAOCP vol. 2, Algorithm 3.4.2P, from the front) into ``out``: step ``i`` swaps position ``i``
    with ``i + offsets[i]``, ``offsets[i]`` uniform in ``[0, n - i)``. Uniform offsets give a
    uniformly random ordered sample of ``len(offsets)`` distinct values."""
    values = np.arange(n)
    for i in range(offsets.shape[0]):
        j = i + offsets[i]
        values[i], values[j] = values[j], values[i]
        out[i] = values[i]
    return out


LOW_BITS = 37  # a 53-bit uniform as a 16-bit prefix and, read only on a tie, 37 more bits
PREFIXES_PER_BLOCK = 32  # two 16-bit prefixes per 32-bit word
HALVES_PER_CHUNK = LANES * PREFIXES_PER_BLOCK  # the prefixes of one chunk of LANES blocks


@njit(cache=True)
def prefix_bernoulli(key, counter, nonce_lo, nonce_hi, tie_counter, tie_nonce_hi, threshold, out):
    """The indices ``i < len(out)`` with ``r_i < threshold`` (``0 <= threshold <= 2^53``) into the front of
    ``out``, in order; returns their count. ``r_i = h_i 2^37 + l_i`` is a 53-bit uniform read lazily:
    its prefix ``h_i`` is half ``i % 2`` (low half first) of word ``(i // 2) % 16`` of block
    ``counter + i // 32`` at nonce ``(nonce_lo, nonce_hi)``, and decides alone unless it equals the
    threshold's own prefix (probability 2^-16); only then are ``l_i``'s 37 bits read, word 0 and the top
    five bits of word 1 of block ``tie_counter + i`` at nonce ``(nonce_lo, tie_nonce_hi)``. So each index
    is kept independently with probability ``threshold / 2^53`` exactly, from a quarter of the keystream
    that one 53-bit uniform per index reads."""
    n = out.shape[0]
    high, low = threshold >> LOW_BITS, threshold & ((np.int64(1) << LOW_BITS) - 1)
    x = np.empty((16, LANES), np.uint32)
    state = np.empty((16, LANES), np.uint32)
    words = np.empty(LANES * 16, np.uint32)
    candidates = np.empty(HALVES_PER_CHUNK, np.bool_)  # prefix <= high: kept, or a tie to settle
    groups = candidates.view(np.uint64)
    tie = np.empty(16, np.uint32)
    count = 0
    for chunk in range((n + HALVES_PER_CHUNK - 1) // HALVES_PER_CHUNK):
        chunk_words(key, np.uint64(counter) + np.uint64(chunk * LANES), nonce_lo, nonce_hi, 0, words, x, state)
        first = chunk * HALVES_PER_CHUNK
        _candidates(words, high, candidates)
        for group in range(groups.shape[0]):  # about 96 % of the groups of eight hold no candidate
            if groups[group] == 0:
                continue
            for j in range(8 * group, min(8 * group + 8, n - first)):
                if not candidates[j]:
                    continue
                if _prefix(words, j) == high:  # a tie: the uniform's other 37 bits decide
                    block = np.uint64(tie_counter) + np.uint64(first + j)
                    chunk_words(key, block, nonce_lo, tie_nonce_hi, 0, tie, x, state)
                    if ((np.int64(tie[0]) << 5) | np.int64(tie[1] >> np.uint32(27))) >= low:
                        continue
                out[count] = first + j
                count += 1
    return count


@njit(inline="always", cache=True)
def _prefix(words, j):
    """Prefix ``j`` of a chunk: half ``j % 2`` (low half first) of word ``j // 2``."""
    return np.int64((words[j >> 1] >> np.uint32(16 * (j & 1))) & np.uint32(0xFFFF))


@njit(inline="always", cache=True)
def _candidates(words, high, candidates):
    """``candidates[j]``: prefix ``j`` at most ``high``, written without branches (vectorized)."""
    for w in range(words.shape[0]):
        word = np.int64(words[w])
        candidates[2 * w] = (word & 0xFFFF) <= high
        candidates[2 * w + 1] = (word >> 16) <= high
