"""Independent, reproducible seeds for the parts of a device (matrix, noise, ...)."""

from __future__ import annotations

import numpy as np

STREAMS = ("matrix", "noise", "camera", "anchor", "dark-map")


def stream_seed(seed: int, stream: str) -> int:
    """A 63-bit seed for ``stream`` derived from the profile seed (numpy SeedSequence)."""
    index = STREAMS.index(stream)
    words = np.random.SeedSequence([seed, index]).generate_state(2, dtype=np.uint32)
    return int(words[0]) << 31 | int(words[1]) >> 1
