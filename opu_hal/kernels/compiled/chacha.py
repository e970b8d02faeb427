"""The ChaCha20 keystream on the CPU, compiled: the secure generator's counter-mode stream.

The block function of RFC 8439 (Bernstein 2008; 20 rounds) on the state

    constants | 256-bit key | 64-bit block counter | 64-bit nonce

(the layout of :mod:`opu_hal.kernels.triton_chacha`, so one key covers 2^64 blocks), computed for 16 blocks
at a time in lanes the compiler turns into SIMD instructions, and split over the CPU threads:
about 1.3 ns per 64-bit word on the 2-core machine, against about 9.5 ns for randomgen's ChaCha20
(two streams in two threads). Each block's sixteen words become eight float64 uniforms of 53 bits
(numpy's construction). The key comes from :func:`os.urandom` and lives only in
:class:`opu_hal.randomness.secure_random.SecureGenerator` (and in checkpoints, which are secret).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .philox import uniform53

LANES = 16  # blocks computed side by side
UNIFORMS_PER_BLOCK = 8


@njit(inline="always", cache=True)
def _quarter(x, a, b, c, d):
    """RFC 8439 section 2.1 on every lane of rows ``a, b, c, d`` (additions wrap modulo 2^32)."""
    for lane in range(LANES):
        x[a, lane] = np.uint32(x[a, lane] + x[b, lane])
        t = x[d, lane] ^ x[a, lane]
        x[d, lane] = np.uint32((t << np.uint32(16)) | (t >> np.uint32(16)))
        x[c, lane] = np.uint32(x[c, lane] + x[d, lane])
        t = x[b, lane] ^ x[c, lane]
        x[b, lane] = np.uint32((t << np.uint32(12)) | (t >> np.uint32(20)))
        x[a, lane] = np.uint32(x[a, lane] + x[b, lane])
        t = x[d, lane] ^ x[a, lane]
        x[d, lane] = np.uint32((t << np.uint32(8)) | (t >> np.uint32(24)))
        x[c, lane] = np.uint32(x[c, lane] + x[d, lane])
        t = x[b, lane] ^ x[c, lane]
        x[b, lane] = np.uint32((t << np.uint32(7)) | (t >> np.uint32(25)))


@njit(inline="always", cache=True)
def set_lane(state, lane, key, block, nonce_lo, nonce_hi):
    """Column ``lane`` of ``state``: the RFC 8439 input block for ``block`` (64-bit counter) and nonce."""
    state[0, lane] = 0x61707865  # "expand 32-byte k"
    state[1, lane] = 0x3320646E
    state[2, lane] = 0x79622D32
    state[3, lane] = 0x6B206574
    for word in range(8):
        state[4 + word, lane] = key[word]
    state[12, lane] = np.uint32(block & np.uint64(0xFFFFFFFF))
    state[13, lane] = np.uint32(block >> np.uint64(32))
    state[14, lane] = nonce_lo
    state[15, lane] = nonce_hi


@njit(inline="always", cache=True)
def twenty_rounds(x):
    """The 20 ChaCha20 rounds (10 double rounds), in place on every lane of ``x``."""
    for _ in range(10):
        _quarter(x, 0, 4, 8, 12)
        _quarter(x, 1, 5, 9, 13)
        _quarter(x, 2, 6, 10, 14)
        _quarter(x, 3, 7, 11, 15)
        _quarter(x, 0, 5, 10, 15)
        _quarter(x, 1, 6, 11, 12)
        _quarter(x, 2, 7, 8, 13)
        _quarter(x, 3, 4, 9, 14)


@njit(inline="always", cache=True)
def _rounds(key, counter, nonce_lo, nonce_hi, first_block, x, state):
    """The input ``state`` of blocks ``counter + first_block + lane`` (16 x LANES) and, in ``x``, the
    state after the 20 rounds: the keystream word is ``x + state`` (added where it is stored)."""
    for lane in range(LANES):
        set_lane(state, lane, key, np.uint64(counter) + np.uint64(first_block + lane), nonce_lo, nonce_hi)
    x[:, :] = state
    twenty_rounds(x)


@njit(parallel=True, cache=True)
def keystream_words(key, counter, nonce_lo, nonce_hi, n_blocks, out):
    """The sixteen words of blocks ``counter .. counter + n_blocks - 1`` into ``out`` (n_blocks x 16)."""
    flat = out.reshape(-1)
    for chunk in prange((n_blocks + LANES - 1) // LANES):
        chunk_words(
            key,
            counter,
            nonce_lo,
            nonce_hi,
            chunk,
            flat,
            np.empty((16, LANES), np.uint32),
            np.empty((16, LANES), np.uint32),
        )


@njit(inline="always", cache=True)
def chunk_words(key, counter, nonce_lo, nonce_hi, chunk, out, x, state):
    """The ``LANES`` blocks of one chunk in order into ``out`` (flat; word ``i`` is word ``i % 16`` of block
    ``counter + i // 16``, as far as ``out`` reaches; ``x``, ``state``: ``(16, LANES)`` scratch)."""
    _rounds(key, counter, nonce_lo, nonce_hi, chunk * LANES, x, state)
    base = chunk * LANES * 16
    if base + LANES * 16 <= out.shape[0]:  # a whole chunk: no bound test, so no scattered stores (17 % faster)
        for lane in range(LANES):
            for word in range(16):
                out[base + lane * 16 + word] = np.uint32(x[word, lane] + state[word, lane])
        return
    for lane in range(LANES):
        for word in range(16):
            i = base + lane * 16 + word
            if i < out.shape[0]:
                out[i] = np.uint32(x[word, lane] + state[word, lane])


@njit(parallel=True, cache=True)
def uniforms(key, counter, nonce_lo, nonce_hi, out):
    """``len(out)`` uniforms in [0, 1) from blocks ``counter, counter + 1, ...``: uniform ``i`` is
    words ``2 (i % 8)``, ``2 (i % 8) + 1`` of block ``counter + i // 8``."""
    per_chunk = LANES * UNIFORMS_PER_BLOCK
    for chunk in prange((out.shape[0] + per_chunk - 1) // per_chunk):
        chunk_uniforms(
            key,
            counter,
            nonce_lo,
            nonce_hi,
            chunk,
            out,
            np.empty((16, LANES), np.uint32),
            np.empty((16, LANES), np.uint32),
        )


@njit(inline="always", cache=True)
def chunk_uniforms(key, counter, nonce_lo, nonce_hi, chunk, out, x, state):
    """The ``LANES * UNIFORMS_PER_BLOCK`` uniforms of one chunk of :func:`uniforms` into ``out``
    (``x``, ``state``: ``(16, LANES)`` scratch)."""
    n = out.shape[0]
    _rounds(key, counter, nonce_lo, nonce_hi, chunk * LANES, x, state)
    start = chunk * LANES * UNIFORMS_PER_BLOCK
    for lane in range(LANES):
        for pair in range(UNIFORMS_PER_BLOCK):
            i = start + lane * UNIFORMS_PER_BLOCK + pair
            if i < n:
                hi = np.uint32(x[2 * pair, lane] + state[2 * pair, lane])
                lo = np.uint32(x[2 * pair + 1, lane] + state[2 * pair + 1, lane])
                out[i] = uniform53(hi, lo)


def blocks_for(n: int) -> int:
    """ChaCha20 blocks that ``n`` uniforms consume."""
    return -(-n // UNIFORMS_PER_BLOCK)


def key_words(key: bytes) -> np.ndarray:
    """A 32-byte key as eight little-endian uint32 words."""
    if len(key) != 32:
        raise ValueError(f"a ChaCha20 key has 32 bytes, got {len(key)}")
    return np.frombuffer(key, dtype="<u4").astype(np.uint32)
