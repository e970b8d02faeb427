"""The private samplers' draws on the compiled counter-mode ChaCha20 keystream (RFC 8439).

A :class:`KeyedStream` is the keystream of one 256-bit key, the key :func:`keyed_generator` gives a
``(stream, index)`` pair (:func:`opu_hal.randomness.secure_random.stream_key`: keyed BLAKE2b-256
of the label under the run's secret), read in order from block 0 at the nonce words
``(SAMPLING_NONCE, 0)``. randomgen's ChaCha20 under the same key counts its blocks in the
counter and nonce words together (a 128-bit block counter), so it would reach that nonce only after
4 x 2^64 blocks: the two never share a (key, block, nonce). Each draw reserves its blocks by moving the stream's counter past
them first, so no block is read twice. Value ``i`` of a draw is a 53-bit uniform from the words
``2 (i % 8)``, ``2 (i % 8) + 1`` of its ``i // 8``-th block (:func:`opu_hal.kernels.compiled.chacha.uniforms`,
numpy's construction; drawn on one thread by :mod:`opu_hal.kernels.compiled.keyed_draws`); bounded integers take those 53 bits by exact rejection (Lemire 2019,
"Fast random integer generation in an interval", the division-free test aside), so a
permutation or a draw without replacement is exactly uniform. About 1.5 ns a value instead of
randomgen's 10, and the Python-level set-up of a randomgen generator per step goes too.

Normals (:meth:`KeyedStream.standard_normal`, for per-step privacy noise keyed like the batches) are
float32 from the 32-bit ziggurat of :mod:`opu_hal.kernels.compiled.chacha_normal32` at the nonce word
:data:`NORMALS_NONCE`, whose layout keeps them apart from the uniforms' ``(SAMPLING_NONCE, 0)``; each
call reserves its blocks from a counter of its own before they are computed, and runs on one thread
like the uniforms.
"""

from __future__ import annotations

import math

import numpy as np

from .secure_random import stream_key

SAMPLING_NONCE = 4  # the keyed streams' nonce word (the secure generator's own key uses 0 to 3)
KEYED_STREAM_NAME = (
    "ChaCha20 (compiled counter mode; float32 normals by the Marsaglia-Tsang ziggurat, 32-bit proposals) "
    "keyed per step by BLAKE2b-256 of a 256-bit key from os.urandom"
)
NORMALS_NONCE = 5  # the keyed streams' normals (first nonce word; the second numbers their substreams)
_TWO_53 = 1 << 53


class KeyedStream:
    """The counter-mode keystream of one key, as the draws a sampler needs (needs Numba)."""

    def __init__(self, key: int) -> None:
        from ..kernels.compiled import chacha

        self._key = chacha.key_words(key.to_bytes(32, "little"))
        self._block = 0
        self._normal_block = 0
        self._prefix_block = 0
        self._tie_block = 0

    def random(self, n: int) -> np.ndarray:
        """The next ``n`` uniforms in [0, 1) (float64, 53 bits)."""
        from ..kernels.compiled import chacha, keyed_draws

        start = self._block
        self._block += chacha.blocks_for(n)  # reserved before they are computed: never read twice
        return keyed_draws.serial_uniforms(
            self._key, np.uint64(start), np.uint32(SAMPLING_NONCE), np.uint32(0), np.empty(n)
        )

    def standard_normal(self, size: int | tuple[int, ...], dtype: type = np.float32) -> np.ndarray:
        """The next standard normals of shape ``size`` (float32 only: numpy's signature, the 32-bit
        ziggurat); a float64 request is refused rather than rounded."""
        from ..kernels.compiled import chacha_normal32

        if np.dtype(dtype) != np.float32:
            raise ValueError(f"a keyed stream draws float32 normals only, got {np.dtype(dtype)}")
        shape = (size,) if isinstance(size, int) else tuple(size)
        n = int(np.prod(shape, dtype=np.int64))
        start = self._normal_block
        self._normal_block += chacha_normal32.blocks_for(n)  # reserved before they are computed
        out = np.empty(n, np.float32)
        return chacha_normal32.standard_normals(self._key, start, NORMALS_NONCE, out, parallel=False).reshape(shape)

    def integers_below(self, bounds: np.ndarray) -> np.ndarray:
        """One integer uniform in ``[0, bounds[i])`` per bound (each ``1 <= bound <= 2^53``), exactly:
        a 53-bit value ``r`` is kept when ``r < floor(2^53 / bound) bound`` (then ``r % bound``
        is uniform); a rejected one is redrawn from the next values, in order."""
        bounds = np.asarray(bounds, dtype=np.int64)
        if bounds.size and (bounds.min() < 1 or bounds.max() > _TWO_53):
            raise ValueError(f"bounds must lie in [1, 2^53], got {bounds.min()} .. {bounds.max()}")
        raw = (self.random(bounds.size) * _TWO_53).astype(np.int64)  # exact: the 53 bits themselves
        limits = (_TWO_53 // bounds) * bounds
        for i in np.flatnonzero(raw >= limits):  # probability below bound / 2^53 each
            while raw[i] >= limits[i]:
                raw[i] = int(self.random(1)[0] * _TWO_53)
        return raw % bounds

    def bernoulli_indices(self, n: int, rate: float) -> np.ndarray:
        """The sorted indices of ``range(n)`` each kept independently with probability
        ``ceil(rate 2^53) / 2^53``, the law of ``flatnonzero(self.random(n) < rate)``, from a quarter of its
        keystream: each index's 53-bit uniform is read 16 bits first, at the nonce words ``(SAMPLING_NONCE,
        1)``, and its other 37 bits only on a tie with the threshold, at ``(SAMPLING_NONCE, 2)``
        (:func:`opu_hal.kernels.compiled.keyed_draws.prefix_bernoulli`). Both counters move past the
        call's blocks first."""
        from ..kernels.compiled.keyed_draws import PREFIXES_PER_BLOCK, prefix_bernoulli

        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"an inclusion probability lies in [0, 1], got {rate}")
        threshold = math.ceil(rate * _TWO_53)  # exact: a float times a power of two
        start, tie = self._prefix_block, self._tie_block
        self._prefix_block += -(-n // PREFIXES_PER_BLOCK)
        self._tie_block += n  # one block per index, computed only on a tie
        out = np.empty(n, np.int64)
        count = prefix_bernoulli(
            self._key,
            np.uint64(start),
            np.uint32(SAMPLING_NONCE),
            np.uint32(1),
            np.uint64(tie),
            np.uint32(2),
            np.int64(threshold),
            out,
        )
        return out[:count]

    def choice(self, n: int, size: int, replace: bool = False) -> np.ndarray:
        """``size`` distinct values of ``range(n)`` uniformly at random, in random order (the front
        of a Fisher-Yates shuffle); only ``replace=False`` (numpy's signature)."""
        from ..kernels.compiled.keyed_draws import partial_shuffle

        if replace or not 0 <= size <= n:
            raise ValueError(f"a draw without replacement takes 0 <= size <= n, got size {size}, n {n}")
        offsets = self.integers_below(n - np.arange(size, dtype=np.int64))
        return partial_shuffle(n, offsets, np.empty(size, np.int64))

    def permutation(self, n: int) -> np.ndarray:
        """A uniformly random permutation of ``range(n)``."""
        return self.choice(n, n)


def keyed_stream(key: str, stream: str, index: int) -> KeyedStream:
    """The compiled keystream of ``(stream, index)`` under the secret ``key``: the key of
    :func:`opu_hal.randomness.secure_random.keyed_generator`, another nonce."""
    return KeyedStream(stream_key(key, stream, index))
