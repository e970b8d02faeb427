"""Minibatch index streams, stateless given ``(seed or secret key, epoch, step)`` so a resumed run
draws exactly the batches an uninterrupted one would.

- ``shuffle``: disjoint batches of a fresh permutation each epoch (non-private training).
- ``fixed``: every step, ``m`` indices drawn uniformly without replacement, independently of the
  other steps (paper 002, Algorithm 1 line 5; accounted by ``FixedSizeGaussianEvent``).
- ``poisson``: every step, each example joins independently with probability ``q = m / N``
  (Abadi et al.; accounted by ``PoissonGaussianEvent``).
- ``rejection``: Poisson sampling, redrawn while the batch has fewer than ``min_batch`` examples
  (paper 004, Definition 3.4; accounted by ``SampledWithRejectionGaussianEvent``).

Private runs (``secret_key`` set) draw from ChaCha20 streams keyed per step by the secret
(:func:`opu_hal.randomness.secure_random.stream_key`): the compiled counter-mode keystream
(:func:`opu_hal.randomness.keyed_stream.keyed_stream`) with Numba, else randomgen's
(:func:`opu_hal.randomness.secure_random.keyed_generator`). A sampler fixes that choice when it is
made and keeps it in its state, so a checkpoint replays its batches from the same stream (states
from before the compiled stream: randomgen; a compiled one refuses to replay without Numba). New
compiled samplers decide each Poisson inclusion on a 16-bit prefix of its uniform
(:data:`PREFIX_STREAM`: the same law from a quarter of the keystream, about 3x faster a batch).
Non-private runs draw from torch generators seeded by ``--seed``, so that they are reproducible from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from opu_hal.randomness.draws import bernoulli_indices, permutation, sample_without_replacement
from opu_hal.randomness.keyed_stream import KEYED_STREAM_NAME, KeyedStream, keyed_stream
from opu_hal.randomness.secure_random import KEYED_GENERATOR_NAME, keyed_generator
from opu_hal.randomness.seeding import derive_seed
from opu_hal.runtime.compute import compiled_ready

from .errors import TrainingConfigError

COMPILED_STREAM, RANDOMGEN_STREAM = "compiled", "randomgen"  # where a private sampler's draws come from
#: The compiled keystream with Poisson inclusions decided on 16-bit prefixes of their uniforms
#: (:meth:`opu_hal.randomness.keyed_stream.KeyedStream.bernoulli_indices`: the same law, a quarter of the
#: keystream); :data:`COMPILED_STREAM` samplers, from checkpoints written before it, read whole uniforms.
PREFIX_STREAM = "compiled-prefix"
SAMPLER_STREAMS = (PREFIX_STREAM, COMPILED_STREAM, RANDOMGEN_STREAM)


def default_stream() -> str:
    """The compiled keystream where Numba runs, else randomgen."""
    return COMPILED_STREAM if compiled_ready(torch.device("cpu")) else RANDOMGEN_STREAM


def default_sampler_stream() -> str:
    """A new private sampler's keystream: :data:`PREFIX_STREAM` where Numba runs, else randomgen."""
    return PREFIX_STREAM if compiled_ready(torch.device("cpu")) else RANDOMGEN_STREAM


def keyed_draws(kind: str, key: str, stream: str, index: int) -> KeyedStream | np.random.Generator:
    """The ChaCha20 stream of ``(stream, index)`` under the secret ``key``: compiled
    (:data:`COMPILED_STREAM`, :data:`PREFIX_STREAM`) or randomgen's. A compiled one refuses to run without Numba: a
    checkpoint's replayed draws from another stream would be fresh ones (a second release)."""
    if kind == RANDOMGEN_STREAM:
        return keyed_generator(key, stream, index)
    if not compiled_ready(torch.device("cpu")):
        raise TrainingConfigError(
            f"the {stream!r} draws come from the compiled ChaCha20 stream, which needs Numba "
            "(and OPU_HAL_NO_NUMBA unset) to replay a checkpoint exactly"
        )
    return keyed_stream(key, stream, index)


def keyed_draws_name(kind: str) -> str:
    """What a record says of the per-step keyed draws of ``kind``."""
    return KEYED_GENERATOR_NAME if kind == RANDOMGEN_STREAM else KEYED_STREAM_NAME


def step_generator(seed: int, stream: str, index: int) -> torch.Generator:
    """A generator for one ``(stream, index)`` pair, independent of every other pair."""
    return torch.Generator().manual_seed(derive_seed(seed, stream, index))


@dataclass(frozen=True)
class Sampler:
    kind: str
    dataset_size: int
    batch_size: int
    seed: int
    min_batch: int = 0
    #: Private runs: batches are drawn from streams keyed by this secret (never recorded), because
    #: subsampling amplifies privacy only if nobody can tell which examples a batch holds.
    secret_key: str | None = field(default=None, repr=False)
    #: The size the run's shape comes from (steps per epoch, sampling rate): a declared public bound
    #: under add/remove (``--public-dataset-size``), so that neither depends on the private ``n``.
    public_size: int | None = None
    #: Private runs: the keystream the batches come from (one of :data:`SAMPLER_STREAMS`), fixed at
    #: creation and kept in checkpoints.
    stream: str = field(default_factory=default_sampler_stream)

    @property
    def shape_size(self) -> int:
        return self.dataset_size if self.public_size is None else self.public_size

    @property
    def steps_per_epoch(self) -> int:
        if self.kind == "shuffle":
            return -(-self.dataset_size // self.batch_size)
        return max(1, self.shape_size // self.batch_size)

    @property
    def sampling_rate(self) -> float:
        return min(1.0, self.batch_size / self.shape_size)

    def batch(self, epoch: int, step_in_epoch: int) -> torch.Tensor:
        """Indices of batch ``step_in_epoch`` of ``epoch``."""
        if self.secret_key is not None:
            return self._secret_batch(epoch, step_in_epoch)
        global_step = epoch * self.steps_per_epoch + step_in_epoch
        if self.kind == "shuffle":
            order = torch.randperm(self.dataset_size, generator=step_generator(self.seed, "epoch", epoch))
            return order[step_in_epoch * self.batch_size : (step_in_epoch + 1) * self.batch_size]
        generator = step_generator(self.seed, "batch", global_step)
        if self.kind == "fixed":
            return torch.randperm(self.dataset_size, generator=generator)[: self.batch_size]
        mask = torch.rand(self.dataset_size, generator=generator) < self.sampling_rate
        if self.kind == "rejection":
            while int(mask.sum()) < self.min_batch:  # rejected: draw the whole batch again
                mask = torch.rand(self.dataset_size, generator=generator) < self.sampling_rate
        return mask.nonzero().flatten()

    def _secret_batch(self, epoch: int, step_in_epoch: int) -> torch.Tensor:
        """:meth:`batch` of a private run: the same laws, drawn from the ChaCha20 stream the secret
        key gives this step (or epoch, for ``shuffle``)."""
        if self.kind == "shuffle":
            order = permutation(self.keyed("epoch", epoch), self.dataset_size)
            return order[step_in_epoch * self.batch_size : (step_in_epoch + 1) * self.batch_size]
        generator = self.keyed("batch", epoch * self.steps_per_epoch + step_in_epoch)
        if self.kind == "fixed":
            return sample_without_replacement(generator, self.dataset_size, self.batch_size)
        indices = self._inclusions(generator)
        if self.kind == "rejection":
            while len(indices) < self.min_batch:  # rejected: draw the whole batch again
                indices = self._inclusions(generator)
        return indices

    def _inclusions(self, generator: KeyedStream | np.random.Generator) -> torch.Tensor:
        """One Poisson draw of the batch: each example kept with probability :attr:`sampling_rate`."""
        if self.stream == PREFIX_STREAM and isinstance(generator, KeyedStream):
            return torch.from_numpy(generator.bernoulli_indices(self.dataset_size, self.sampling_rate))
        return bernoulli_indices(generator, self.dataset_size, self.sampling_rate)

    def keyed(self, stream: str, index: int) -> KeyedStream | np.random.Generator:
        """The ChaCha20 stream of ``(stream, index)`` under the secret key, from :attr:`stream`."""
        assert self.secret_key is not None
        return keyed_draws(self.stream, self.secret_key, stream, index)

    def state_dict(self) -> dict[str, str | None]:
        """The secret key of a private sampler and its stream (SECRET: the key recomputes every
        batch; checkpoints only)."""
        return {"secret_key": self.secret_key, "stream": self.stream}

    def with_state(self, state: dict[str, str | None]) -> Sampler:
        """This sampler drawing with the key and stream of :meth:`state_dict` (a frozen dataclass:
        a copy); states written before the compiled stream drew from randomgen."""
        stream = state.get("stream") or RANDOMGEN_STREAM
        if stream not in SAMPLER_STREAMS:
            raise TrainingConfigError(
                f"checkpoint sampler state: unknown stream {stream!r} (allowed: {', '.join(map(repr, SAMPLER_STREAMS))})"
            )
        return replace(self, secret_key=state["secret_key"], stream=stream)

    def epoch(self, epoch: int, start: int = 0) -> Iterator[tuple[int, torch.Tensor]]:
        for step in range(start, self.steps_per_epoch):
            yield step, self.batch(epoch, step)
