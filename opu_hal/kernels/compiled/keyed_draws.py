"""The private samplers' draws, compiled and on one thread (:mod:`opu_hal.randomness.keyed_stream`):
a batch needs a few thousand values, too few to repay waking a second thread (on a loaded machine,
the wait for it costs milliseconds).

- :func:`serial_uniforms`: :func:`opu_hal.kernels.compiled.chacha.uniforms`'s values, serially.
- :func:`partial_shuffle`: the front of a Fisher-Yates shuffle driven by given uniform offsets.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .chacha import LANES, UNIFORMS_PER_BLOCK, chunk_uniforms


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
