"""Minibatch index streams, stateless given ``(seed, epoch, step)`` so a resumed run draws exactly
the batches an uninterrupted one would.

- ``shuffle``: disjoint batches of a fresh permutation each epoch (non-private training).
- ``fixed``: every step, ``m`` indices drawn uniformly without replacement, independently of the
  other steps (paper 002, Algorithm 1 line 5; accounted by ``FixedSizeGaussianEvent``).
- ``poisson``: every step, each example joins independently with probability ``q = m / N``
  (Abadi et al.; accounted by ``PoissonGaussianEvent``).
- ``rejection``: Poisson sampling, redrawn while the batch has fewer than ``min_batch`` examples
  (paper 004, Definition 3.4; accounted by ``SampledWithRejectionGaussianEvent``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import torch

from opu_hal.secure_random import keyed_torch_generator
from opu_hal.seeding import derive_seed


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

    @property
    def shape_size(self) -> int:
        return self.dataset_size if self.public_size is None else self.public_size

    def _generator(self, stream: str, index: int) -> torch.Generator:
        if self.secret_key is not None:
            return keyed_torch_generator(self.secret_key, stream, index)
        return step_generator(self.seed, stream, index)

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
        global_step = epoch * self.steps_per_epoch + step_in_epoch
        if self.kind == "shuffle":
            order = torch.randperm(self.dataset_size, generator=self._generator("epoch", epoch))
            return order[step_in_epoch * self.batch_size:(step_in_epoch + 1) * self.batch_size]
        generator = self._generator("batch", global_step)
        if self.kind == "fixed":
            return torch.randperm(self.dataset_size, generator=generator)[: self.batch_size]
        mask = torch.rand(self.dataset_size, generator=generator) < self.sampling_rate
        if self.kind == "rejection":
            while int(mask.sum()) < self.min_batch:  # rejected: draw the whole batch again
                mask = torch.rand(self.dataset_size, generator=generator) < self.sampling_rate
        return mask.nonzero().flatten()

    def epoch(self, epoch: int, start: int = 0) -> Iterator[tuple[int, torch.Tensor]]:
        for step in range(start, self.steps_per_epoch):
            yield step, self.batch(epoch, step)
