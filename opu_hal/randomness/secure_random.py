"""Privacy randomness from a cryptographically secure generator keyed by OS entropy.

Privacy noise must not be derivable from anything a user publishes (a profile, a result record,
a log, a command line): a seeded pseudo-random stream is replayable by whoever holds the seed,
and a run's release can then be de-noised exactly (issue 12, "replay"). This module draws every
privacy-relevant random number from ChaCha20 (20 rounds; Bernstein 2008) through ``randomgen``'s
numpy bit generator, keyed with 256 bits from :func:`os.urandom`; normals wanted on a CUDA device
come from the same cipher run there (:mod:`opu_hal.kernels.triton_chacha`, one Triton kernel) under a third
key of its own, so a private GPU step never waits for the CPU. That third key drives a counter-mode
stream (one 64-bit block counter): on the CPU with Numba, the Poisson counts of a Skellam release are
drawn by PTRS on its uniforms (:mod:`opu_hal.kernels.compiled.chacha` and
:func:`opu_hal.kernels.compiled.poisson_constant.constant_mean_counts`, nonce 1; the GPU normals use nonce 0), about
4x faster than randomgen's ChaCha20 under numpy's PTRS; the CPU normals by the Marsaglia-Tsang
ziggurat on it in numpy's float32 form, one 32-bit word a proposal (:mod:`opu_hal.kernels.compiled.chacha_normal32`,
nonce word 2, the second nonce word numbering each normal's substream; the 64-bit form of
:mod:`opu_hal.kernels.compiled.chacha_normal` for generators restored from checkpoints that drew with it),
about 4x faster than randomgen's ziggurat in two threads; and the
uniforms (lattice rounding, audits; nonce 3). Each draw reserves its blocks by moving the one
counter past them before they are computed, and each purpose has its own nonce word, so no
(block, nonce) pair is ever used twice. Without Numba, normals and uniforms come from randomgen; a
generator fixes that choice when it is made and keeps it in its state (``cpu_stream``), so a
checkpoint replays from the same stream (states from before the compiled normals: randomgen).

Trainers that must replay a step from a key (batch sampling of private runs, DP-ULR and DP-MAC
noise) use :func:`keyed_generator`: a ChaCha20 stream per ``(stream, index)`` whose 256-bit key is
keyed BLAKE2b-256 of the label under the run's 256-bit secret (:func:`new_secret_key`); private
batches take the same key's compiled keystream with Numba (:mod:`opu_hal.randomness.keyed_stream`). Never a
torch generator: torch keeps only the low 32 bits of a seed, which brute force recovers (issue 27).

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

from ..contract.errors import OpuHalError
from ..kernels.compiled import compute_threads
from ..runtime.compute import compiled_ready, triton_ready

GENERATOR_NAME = "ChaCha20 (randomgen), 256-bit key from os.urandom"
CUDA_GENERATOR_NAME = "ChaCha20 (Triton kernel on the GPU; Box-Muller normals), 256-bit key from os.urandom"
COUNTS_GENERATOR_NAME = (
    "ChaCha20 (Poisson counts by PTRS on a compiled counter-mode keystream; other draws "
    "randomgen), 256-bit keys from os.urandom"
)
COUNTS_NONCE = 1  # the CPU counts' nonce on the counter-mode stream (the GPU normals use 0)
NORMALS_NONCE = 2  # the CPU normals' nonce on the counter-mode stream
UNIFORMS_NONCE = 3  # the CPU uniforms' nonce on the counter-mode stream (lattice rounding, audits)
# The CPU normals' and uniforms' sources: the counter-mode stream with 32-bit ziggurat proposals (new
# generators), the same with 64-bit proposals (checkpoints written before), randomgen (without Numba).
COUNTER32_STREAM, COUNTER_STREAM, RANDOMGEN_STREAM = "counter32", "counter", "randomgen"
COUNTER_STREAMS = (COUNTER32_STREAM, COUNTER_STREAM)
COUNTER_DRAWS = {
    "normals32": "float32 normals by the Marsaglia-Tsang ziggurat (32-bit proposals)",
    "normals": "normals by the Marsaglia-Tsang ziggurat",
    "counts": "Poisson counts by PTRS",
    "uniforms": "uniforms",
}  # what a generator's name says it drew from the counter-mode stream
PTRS_MIN_MEAN = 10.0  # the compiled counts' range (PTRS); smaller means take numpy's sampler
KEYED_GENERATOR_NAME = "ChaCha20 (randomgen) keyed per step by BLAKE2b-256 of a 256-bit key from os.urandom"
MIN_SECRET_KEY_BITS = 128  # project rule: secrets are at least 128 bits end to end
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


def stream_key(key: str, stream: str, index: int) -> int:
    """The 256-bit ChaCha20 key of ``(stream, index)``: keyed BLAKE2b-256 (a PRF) of the label under
    the secret ``key`` (hex, at least 128 bits). Every bit of it keys the cipher, so no seed of
    fewer bits (torch keeps only 32 of a seed) stands between the secret and the draws."""
    secret = bytes.fromhex(key)
    if len(secret) * 8 < MIN_SECRET_KEY_BITS:
        raise OpuHalError(f"a secret key has at least {MIN_SECRET_KEY_BITS} bits, got {len(secret) * 8}")
    digest = hashlib.blake2b(f"{stream}:{index}".encode(), key=secret, digest_size=32).digest()
    return int.from_bytes(digest, "little")


def keyed_generator(key: str, stream: str, index: int) -> np.random.Generator:
    """A ChaCha20 generator for ``(stream, index)`` keyed by :func:`stream_key`: stateless, so a
    resumed run replays a step exactly from the secret key in its checkpoint, and nothing public
    (seeds, step numbers, records) determines it. For batch sampling and per-step privacy noise."""
    return _chacha(stream_key(key, stream, index))


class SecureGenerator:
    """Secure random numbers for privacy noise; a few independently keyed ChaCha20 streams.

    Large draws are split over two streams in two threads (numpy releases the GIL), which halves
    the time of the Poisson counts a Skellam release needs. Each stream has its own OS-entropy key.
    """

    def __init__(self, keys: list[int] | None = None) -> None:
        keys = keys if keys is not None else [_fresh_key() for _ in range(_THREADS)]
        if len(keys) != _THREADS:
            raise OpuHalError(f"a secure generator holds {_THREADS} streams, got {len(keys)} keys")
        self._streams = [_chacha(k) for k in keys]
        self._lock = threading.Lock()
        self._cuda_key = os.urandom(32)  # the counter-mode stream's key and next block (GPU normals, CPU counts)
        self._cuda_block = 0
        self._cuda_key_words: torch.Tensor | None = None
        self.used_cuda = False  # whether any draw came from the GPU stream (names the generator)
        self.counter_draws: set[str] = set()  # what came from the compiled CPU stream (names the generator)
        # Where CPU normals and uniforms come from, fixed for the generator's life and kept in its
        # state, so that a checkpoint replays them from the same stream (or refuses to).
        self.cpu_stream = COUNTER32_STREAM if compiled_ready(torch.device("cpu")) else RANDOMGEN_STREAM

    @property
    def used_counter_counts(self) -> bool:
        """Whether any Poisson counts came from the compiled counter-mode stream."""
        return "counts" in self.counter_draws

    @property
    def name(self) -> str:
        """What drew the values so far: the GPU kernel, the compiled counter-mode stream (naming
        the draws it served), or randomgen alone."""
        if self.used_cuda:
            return CUDA_GENERATOR_NAME
        if not self.counter_draws:
            return GENERATOR_NAME
        served = " and ".join(COUNTER_DRAWS[kind] for kind in COUNTER_DRAWS if kind in self.counter_draws)
        return (
            f"ChaCha20 ({served} on a compiled counter-mode keystream; other draws randomgen), "
            "256-bit keys from os.urandom"
        )

    # -- secret state (checkpoints only) ---------------------------------------------------------
    def secret_state(self) -> dict[str, Any]:
        """Full stream states (keys, counters, buffers): enough to replay every later draw.
        Store only in a checkpoint, never in a record or log."""
        states = []
        for stream in self._streams:
            inner = stream.bit_generator.state["state"]
            states.append({k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in inner.items()})
        return {
            "generator": self.name,
            "streams": states,
            "cpu_stream": self.cpu_stream,
            "cuda": {"key": self._cuda_key.hex(), "block": self._cuda_block},
        }

    @classmethod
    def from_secret_state(cls, state: dict[str, Any]) -> SecureGenerator:
        """The generator :meth:`secret_state` describes, continuing exactly where it stopped."""
        try:
            streams = state["streams"]
            generator = cls(keys=[0] * len(streams))
            for stream, inner in zip(generator._streams, streams):
                stream.bit_generator.state = {
                    "bit_generator": "randomgen.chacha.ChaCha",
                    "state": {
                        "block": np.asarray(inner["block"], dtype=np.uint32),
                        "keysetup": np.asarray(inner["keysetup"], dtype=np.uint32),
                        "ctr": np.asarray(inner["ctr"], dtype=np.uint64),
                        "rounds": int(inner["rounds"]),
                    },
                }
            # states written before the counter-mode normals drew every CPU normal from randomgen
            generator.cpu_stream = state.get("cpu_stream", RANDOMGEN_STREAM)
            if generator.cpu_stream not in (*COUNTER_STREAMS, RANDOMGEN_STREAM):
                raise ValueError(f"unknown cpu_stream {generator.cpu_stream!r}")
            cuda = state.get("cuda")
            if cuda is not None:
                generator._cuda_key, generator._cuda_block = bytes.fromhex(cuda["key"]), int(cuda["block"])
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

    def standard_normal(self, n: int, device: torch.device | str | None = None) -> torch.Tensor:
        """``n`` i.i.d. N(0, 1) values (float32) on ``device`` (default CPU): drawn on the GPU by
        :mod:`opu_hal.kernels.triton_chacha` when ``device`` is CUDA and Triton is installed, else on the
        CPU (the compiled ziggurat on the counter-mode stream with Numba, else randomgen's) and
        copied there."""
        target = torch.device(device) if device is not None else torch.device("cpu")
        if triton_ready(target):
            return self._cuda_normal(n, target)
        if self._counter_stream():
            normals = torch.from_numpy(self._counter_normals(n))
        else:
            normals = torch.from_numpy(self._split(n, lambda g, k: g.standard_normal(k, dtype=np.float32)))
        return normals if target.type == "cpu" else normals.to(target)

    def _counter_stream(self) -> bool:
        """Whether CPU normals and uniforms come from the compiled counter-mode stream; a generator
        restored from a checkpoint that drew them there refuses to go on without Numba (its
        replayed steps would otherwise draw fresh noise, a second release of the same step)."""
        if self.cpu_stream == RANDOMGEN_STREAM:
            return False
        if not compiled_ready(torch.device("cpu")):
            raise OpuHalError(
                "this secure generator draws its CPU normals from the compiled ChaCha20 stream, "
                "which needs Numba (and OPU_HAL_NO_NUMBA unset) to replay a checkpoint exactly"
            )
        return True

    def _counter_normals(self, n: int) -> np.ndarray:
        """``n`` float32 normals from the counter-mode stream at :data:`NORMALS_NONCE`, by the generator's
        ziggurat (32- or 64-bit proposals, :attr:`cpu_stream`): the counter moves past the call's blocks
        before they are computed, so none is used twice."""
        from ..kernels.compiled import chacha_normal, chacha_normal32

        kernel, draw = (
            (chacha_normal32, "normals32") if self.cpu_stream == COUNTER32_STREAM else (chacha_normal, "normals")
        )
        start = self._reserve(kernel.blocks_for(n), draw)
        with compute_threads():
            return kernel.standard_normals(self._key_words(), start, NORMALS_NONCE, np.empty(n, np.float32))

    def _reserve(self, blocks: int, draw: str) -> int:
        """The first of ``blocks`` fresh blocks of the counter-mode stream, now behind the counter."""
        with self._lock:
            start = self._cuda_block
            self._cuda_block += blocks
            self.counter_draws.add(draw)
        return start

    def _key_words(self) -> np.ndarray:
        from ..kernels.compiled import chacha

        return chacha.key_words(self._cuda_key)

    def _cuda_normal(self, n: int, device: torch.device) -> torch.Tensor:
        from ..kernels import triton_chacha

        with self._lock:
            if self._cuda_key_words is None or self._cuda_key_words.device != device:
                self._cuda_key_words = triton_chacha.key_tensor(self._cuda_key, device)
            normals = triton_chacha.standard_normal(self._cuda_key_words, self._cuda_block, 0, n)
            self._cuda_block += triton_chacha.blocks_for(n)
            self.used_cuda = True
        return normals

    def uniform(self, n: int) -> np.ndarray:
        """``n`` i.i.d. uniforms in [0, 1) (float64): the counter-mode stream at :data:`UNIFORMS_NONCE`, else randomgen."""
        if self._counter_stream():
            return self._counter_uniforms(n, UNIFORMS_NONCE, "uniforms")
        return self._split(n, lambda g, k: g.random(k))

    def poisson(self, mean: float, n: int) -> np.ndarray:
        """``n`` i.i.d. Poisson(``mean``) counts (int64), sampled exactly: PTRS on the compiled
        counter-mode stream (CPU with Numba, ``mean >= 10``), else numpy's PTRS / inversion."""
        if self._compiled_counts(mean):
            from ..kernels.compiled.poisson_constant import constant_mean_counts

            with compute_threads():
                return constant_mean_counts(mean, n, self._counter_uniforms)  # nonce COUNTS_NONCE
        return self._split(n, lambda g, k: g.poisson(mean, k))

    def poisson_at(self, means: np.ndarray) -> np.ndarray:
        """One Poisson count (int64) at each of ``means``: PTRS on the compiled counter-mode stream
        (:mod:`opu_hal.kernels.compiled.poisson_varying`, nonce :data:`COUNTS_NONCE`) where every mean is
        at least 10 and the generator draws its CPU normals there with 32-bit proposals (a generator
        restored from an older checkpoint keeps numpy's draws, so its replay is exact), else numpy's
        PTRS / inversion on the secure streams."""
        means = np.asarray(means, dtype=np.float64)
        if self._compiled_varying_counts(means):
            from ..kernels.compiled.poisson_varying import varying_mean_counts

            with compute_threads():
                return varying_mean_counts(means, self._counter_uniforms, self._first_round)
        with self._lock:
            if means.size < _PARALLEL_MIN:
                return self._streams[0].poisson(means).astype(np.int64)
            half = means.size // 2
            parts = _pool().map(lambda g, m: g.poisson(m), self._streams, (means[:half], means[half:]))
            return np.concatenate(list(parts)).astype(np.int64)

    def skellam(self, mean: float, n: int) -> np.ndarray:
        """``n`` i.i.d. differences of two independent Poisson(``mean``) counts: Skellam(mean, mean)."""
        if self._compiled_counts(mean):
            return self.poisson(mean, n) - self.poisson(mean, n)
        return self._split(n, lambda g, k: g.poisson(mean, k) - g.poisson(mean, k))

    def _compiled_varying_counts(self, means: np.ndarray) -> bool:
        # a NaN minimum fails the test (numpy's sampler refuses it); an infinite mean passes, and the
        # kernel refuses it: one pass over the means here, the kernel's check the other
        return (
            self.cpu_stream == COUNTER32_STREAM
            and means.size > 0
            and compiled_ready(torch.device("cpu"))
            and float(means.min()) >= PTRS_MIN_MEAN
        )

    @staticmethod
    def _compiled_counts(mean: float) -> bool:
        return compiled_ready(torch.device("cpu")) and mean >= PTRS_MIN_MEAN

    def _first_round(self, means: np.ndarray, counts: np.ndarray, settled: np.ndarray) -> None:
        """PTRS's first round at every one of ``means`` on the blocks ``_counter_uniforms(2 len(means))``
        would take, the uniforms read from the keystream where they are used (the same counts)."""
        from ..kernels.compiled import chacha
        from ..kernels.compiled.poisson_varying import first_round

        start = self._reserve(chacha.blocks_for(2 * means.size), "counts")
        first_round(self._key_words(), np.uint64(start), np.uint32(COUNTS_NONCE), means, counts, settled)

    def _counter_uniforms(self, n: int, nonce: int = COUNTS_NONCE, draw: str = "counts") -> np.ndarray:
        """``n`` uniforms from the next blocks of the counter-mode stream at ``nonce`` (the counter
        moves past them first, so no block is ever used twice)."""
        from ..kernels.compiled import chacha

        start = self._reserve(chacha.blocks_for(n), draw)
        out = np.empty(n)
        with compute_threads():
            chacha.uniforms(self._key_words(), np.uint64(start), np.uint32(nonce), np.uint32(0), out)
        return out
