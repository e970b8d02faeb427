"""The private loader: batches drawn by secret sampling from a user's data.

Privacy amplification by subsampling holds only if nobody can tell which examples a batch holds,
so the indices come from :class:`trainers.core.sampling.Sampler` keyed by a 256-bit secret
(:func:`opu_hal.randomness.secure_random.new_secret_key`): Poisson for dp-sgd (Abadi et al.), fixed-size
without replacement for dp-dfa (Lee & Kifer, Algorithm 1 line 5).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset, default_collate

from opu_hal.randomness.secure_random import new_secret_key

from ..core.errors import ArgumentError, TrainingConfigError
from ..core.sampling import Sampler
from .batch_check import BatchMark, fingerprint, first_tensor
from .validation import check_finite_tensors

Data = Dataset[Any] | DataLoader[Any] | tuple[torch.Tensor, ...] | list[torch.Tensor]


def as_dataset(data: Data) -> tuple[Dataset[Any], int | None, Callable[[list[Any]], Any]]:
    """The dataset behind ``data``, its loader's batch size (if any) and its collate function."""
    if isinstance(data, DataLoader):
        return data.dataset, data.batch_size, data.collate_fn
    if isinstance(data, (tuple, list)) and data and all(isinstance(t, torch.Tensor) for t in data):
        lengths = [int(t.shape[0]) if t.dim() else -1 for t in data]
        if min(lengths) < 1 or len(set(lengths)) != 1:
            raise ArgumentError(
                f"data_loader: the tensors must share a first dimension >= 1 (one row per example), got lengths "
                f"{', '.join(str(n) if n >= 0 else '(0-d)' for n in lengths)}"
            )
        check_finite_tensors(tuple(data), "data_loader")
        return TensorDataset(*data), None, default_collate
    if isinstance(data, Dataset):
        return data, None, default_collate
    raise TrainingConfigError(
        f"data_loader must be a DataLoader, a Dataset or a tuple of tensors, got {type(data).__name__}"
    )


def _empty_like(batch: Any) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch[:0]
    if isinstance(batch, (tuple, list)):
        return type(batch)(_empty_like(b) for b in batch)
    if isinstance(batch, dict):
        return {k: _empty_like(v) for k, v in batch.items()}
    raise TrainingConfigError(f"cannot form an empty batch of {type(batch).__name__} (Poisson sampling may draw one)")


class PrivateDataLoader:
    """Iterates one epoch of ``len(self)`` secretly sampled batches; stops early once the engine's
    budget would be crossed by the next step (``should_stop``)."""

    def __init__(
        self,
        dataset: Dataset[Any],
        batch_size: int,
        kind: str,
        collate_fn: Callable[[list[Any]], Any],
        should_stop: Callable[[], bool],
        public_size: int | None = None,
    ) -> None:
        size = len(dataset)  # type: ignore[arg-type]
        if size < 1:
            raise ArgumentError("data_loader: the dataset is empty; a private run needs at least one example")
        if not 1 <= batch_size <= (public_size or size):
            raise TrainingConfigError(
                f"batch_size must be in [1, {public_size or size}] (the dataset's size), got {batch_size}"
            )
        self.dataset = dataset
        self.collate_fn = collate_fn
        self.sampler = Sampler(kind, size, batch_size, seed=0, secret_key=new_secret_key(), public_size=public_size)
        self.should_stop = should_stop
        #: Epochs started so far (the next ``iter`` draws epoch ``self.epoch``).
        self.epoch = 0
        #: The mark of the batch last drawn that no step has released yet (:mod:`.batch_check`).
        self.drawn: BatchMark | None = None

    @property
    def batch_size(self) -> int:
        return self.sampler.batch_size

    @property
    def dataset_size(self) -> int:
        """The size the run's shape and accounting use (the declared public size, if any)."""
        return self.sampler.shape_size

    @property
    def sample_rate(self) -> float:
        return self.sampler.sampling_rate

    def __len__(self) -> int:
        return self.sampler.steps_per_epoch

    def fetch(self, indices: torch.Tensor) -> Any:
        if isinstance(self.dataset, TensorDataset):
            return tuple(t[indices] for t in self.dataset.tensors)
        if len(indices) == 0:
            return _empty_like(self.collate_fn([self.dataset[0]]))
        return self.collate_fn([self.dataset[int(i)] for i in indices])

    def __iter__(self) -> Iterator[Any]:
        epoch, self.epoch = self.epoch, self.epoch + 1
        for _, indices in self.sampler.epoch(epoch):
            if self.should_stop():
                return
            batch = self.fetch(indices)
            check_finite_tensors(batch, f"data_loader batch of epoch {epoch}")
            self.drawn = BatchMark(len(indices), fingerprint(first_tensor(batch)))
            yield batch

    def take_drawn(self) -> BatchMark | None:
        """The mark of the batch drawn for this step; a second step on it finds none."""
        drawn, self.drawn = self.drawn, None
        return drawn

    def state_dict(self) -> dict[str, Any]:
        """Epoch counter and the sampling key (secret: keep with checkpoints only)."""
        return {"epoch": self.epoch, "secret_key": self.sampler.secret_key}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epoch = int(state["epoch"])
        self.sampler = replace(self.sampler, secret_key=state["secret_key"])
