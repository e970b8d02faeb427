"""Privacy randomness from a cryptographically secure generator keyed by OS entropy.

Privacy noise must not be derivable from anything a user publishes (a profile, a result record,
a log, a command line): a seeded pseudo-random stream is replayable by whoever holds the seed,
and a run's release can then be de-noised exactly (issue 12, "replay"). This module draws every
privacy-relevant random number from ChaCha20 (20 rounds; Bernstein 2008) through ``randomgen``'s
numpy bit generator, keyed with 256 bits from :func:`os.urandom`.

The key and counter (:meth:`SecureGenerator.secret_state`) are exported only into checkpoints, so
that a resumed run can replay exactly the noise of the steps it recomputes: a checkpoint is
therefore a secret, like the training data itself.
"""

from __future__ import annotations

import hashlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

from .errors import OpuHalError

GENERATOR_NAME = "ChaCha20 (randomgen), 256-bit key from os.urandom"
KEYED_GENERATOR_NAME = "torch generators seeded per step by keyed BLAKE2b of a 256-bit key from os.urandom"
_THREADS = 2
_PARALLEL_MIN = 1 << 16


def _chacha(key: int) -> np.random.Generator:
    try:
        from randomgen import ChaCha
    except ImportError as exc:  # pragma: no cover - randomgen is a runtime dependency
        raise OpuHalError(f"the secure generator needs randomgen ({exc}); pip install 'randomgen>=2.1,<3'") from None
    return np.random.Generator(ChaCha(key=key, rounds=20))


_POOL: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=_THREADS, thread_name_prefix="opu-hal-secure")
    return _POOL


def _fresh_key() -> int:
    return int.from_bytes(os.urandom(32), "little")


def new_secret_key() -> str:
    """256 bits from OS entropy, hex-encoded: the key of a run's secret per-step streams."""
    return os.urandom(32).hex()


def keyed_torch_generator(key: str, stream: str, index: int) -> torch.Generator:
    """A torch generator for ``(stream, index)`` seeded by keyed BLAKE2b (a PRF) of the secret
    ``key``: stateless, so a resumed run replays a step exactly from the key in its checkpoint, and
    nothing public (seeds, records) determines it. Use for batch sampling and for methods that need
    torch's samplers; the draws themselves are torch's Mersenne Twister from that secret seed."""
    digest = hashlib.blake2b(f"{stream}:{index}".encode(), key=bytes.fromhex(key), digest_size=8).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest, "little") >> 1)


class SecureGenerator:
    """Secure random numbers for privacy noise; a few independently keyed ChaCha20 streams.

    Large draws are split over two streams in two threads (numpy releases the GIL), which halves
    the time of the Poisson counts a Skellam release needs. Each stream has its own OS-entropy key.
    """

    name = GENERATOR_NAME

    def __init__(self, keys: list[int] | None = None) -> None:
        keys = keys if keys is not None else [_fresh_key() for _ in range(_THREADS)]
        if len(keys) != _THREADS:
            raise OpuHalError(f"a secure generator holds {_THREADS} streams, got {len(keys)} keys")
        self._streams = [_chacha(k) for k in keys]
        self._lock = threading.Lock()

    # -- secret state (checkpoints only) ---------------------------------------------------------
    def secret_state(self) -> dict[str, Any]:
        """Full stream states (keys, counters, buffers): enough to replay every later draw.
        Store only in a checkpoint, never in a record or log."""
        states = []
        for stream in self._streams:
            inner = stream.bit_generator.state["state"]
            states.append({k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in inner.items()})
        return {"generator": self.name, "streams": states}

    @classmethod
    def from_secret_state(cls, state: dict[str, Any]) -> "SecureGenerator":
        """The generator :meth:`secret_state` describes, continuing exactly where it stopped."""
        try:
            streams = state["streams"]
            generator = cls(keys=[0] * len(streams))
            for stream, inner in zip(generator._streams, streams):
                stream.bit_generator.state = {
                    "bit_generator": "randomgen.chacha.ChaCha",
                    "state": {"block": np.asarray(inner["block"], dtype=np.uint32),
                              "keysetup": np.asarray(inner["keysetup"], dtype=np.uint32),
                              "ctr": np.asarray(inner["ctr"], dtype=np.uint64), "rounds": int(inner["rounds"])},
                }
        except (KeyError, TypeError, ValueError) as exc:
            raise OpuHalError(f"not a secure generator state: {exc}") from None
        return generator

    # -- draws -------------------------------------------------------------------------------------
    def _split(self, n: int, draw) -> np.ndarray:
        with self._lock:
            if n < _PARALLEL_MIN:
                return draw(self._streams[0], n)
            half = n // 2
            parts = list(_pool().map(draw, self._streams, (half, n - half)))
            return np.concatenate(parts)

    def standard_normal(self, n: int) -> torch.Tensor:
        """``n`` i.i.d. N(0, 1) values (float32)."""
        return torch.from_numpy(self._split(n, lambda g, k: g.standard_normal(k, dtype=np.float32)))

    def uniform(self, n: int) -> np.ndarray:
        """``n`` i.i.d. uniforms in [0, 1) (float64)."""
        return self._split(n, lambda g, k: g.random(k))

    def poisson(self, mean: float, n: int) -> np.ndarray:
        """``n`` i.i.d. Poisson(``mean``) counts (int64), sampled exactly (numpy's PTRS / inversion)."""
        return self._split(n, lambda g, k: g.poisson(mean, k))

    def skellam(self, mean: float, n: int) -> np.ndarray:
        """``n`` i.i.d. differences of two independent Poisson(``mean``) counts: Skellam(mean, mean)."""
        return self._split(n, lambda g, k: g.poisson(mean, k) - g.poisson(mean, k))
