"""Independent, reproducible seeds: one derivation for every random stream of the project.

:func:`derive_seed` maps a root seed and a path of integers to a 63-bit seed through numpy's
``SeedSequence`` (distinct paths give independent streams). Devices use :func:`stream_seed`
(matrix, noise, ...); trainers use ``trainers.core.sampling.step_generator`` (per-step streams).
Privacy noise is never drawn from these alone when it must stay secret (see ``DeviceNoise``).
"""

from __future__ import annotations

import zlib

import numpy as np

STREAMS = (
    "matrix",
    "noise",
    "camera",
    "anchor",
    "dark-map",
    "prnu",
    "anchor-pattern",
    "defects",
    "anchor-speckle",
    "reference-mirrors",
)


def derive_seed(seed: int, *path: int | str) -> int:
    """A 63-bit seed for ``path`` under ``seed``; string parts enter as their CRC-32."""
    words = [seed, *(zlib.crc32(p.encode()) if isinstance(p, str) else int(p) for p in path)]
    state = np.random.SeedSequence(words).generate_state(2, dtype=np.uint32)
    return int(state[0]) << 31 | int(state[1]) >> 1


def stream_seed(seed: int, stream: str) -> int:
    """The seed of a device's ``stream`` (one of :data:`STREAMS`) from the profile seed."""
    return derive_seed(seed, STREAMS.index(stream))
