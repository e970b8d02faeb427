"""The private loader: batches drawn by secret sampling from a user's data.

Privacy amplification by subsampling holds only if nobody can tell which examples a batch holds,
so the indices come from :class:`trainers.core.sampling.Sampler` keyed by a 256-bit secret
(:func:`opu_hal.randomness.secure_random.new_secret_key`): Poisson for dp-sgd (Abadi et al.), fixed-size
without replacement for dp-dfa (Lee & Kifer, Algorithm 1 line 5).

A user's ``torch.utils.data.DataLoader`` keeps its workers, ``pin_memory``, ``collate_fn`` and the
rest: as Opacus's ``DPDataLoader``, each epoch is a ``DataLoader`` over the same dataset whose
``batch_sampler`` yields the secret sampler's batches (:class:`SecureBatchSampler`); the loader's
own sampler and batch size are replaced. Batches arrive on the model's torch device.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset, default_collate
from torch.utils.data import Sampler as TorchSampler
from torch.utils.data._utils.collate import default_convert

from opu_hal.randomness.secure_random import new_secret_key

from ..core.errors import ArgumentError, TrainingConfigError
from ..core.sampling import Sampler
from .batch_check import BatchMark, fingerprint, first_tensor
from .placement import to_device
from .validation import check_finite_tensors

Data = Dataset[Any] | DataLoader[Any] | tuple[torch.Tensor, ...] | list[torch.Tensor]


def rows_of(inputs: Any) -> int:
    """The examples in a batch's inputs: the first dimension of its tensor (or of a dict's first tensor)."""
    if isinstance(inputs, dict):
        inputs = next((v for v in inputs.values() if isinstance(v, torch.Tensor)), None)
    return int(inputs.shape[0]) if isinstance(inputs, torch.Tensor) and inputs.dim() else 0


def as_dataset(data: Data) -> tuple[Dataset[Any], int | None, Callable[[list[Any]], Any]]:
    """The dataset behind ``data``, its loader's batch size (if any) and its collate function."""
    if isinstance(data, DataLoader):
        # batch_size=None turns torch's auto-collation off (collate_fn = default_convert): batches are
        # drawn here, so they are collated as a batched loader's would be
        collate = default_collate if data.collate_fn is default_convert else data.collate_fn
        return data.dataset, data.batch_size, collate
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


#: DataLoader options carried over from the user's loader (its sampler and batch size are replaced).
LOADER_OPTIONS = (
    "num_workers",
    "pin_memory",
    "timeout",
    "worker_init_fn",
    "multiprocessing_context",
    "prefetch_factor",
    "persistent_workers",
    "pin_memory_device",
    "in_order",
)


def loader_options(loader: DataLoader[Any] | None) -> dict[str, Any]:
    """The user's loader settings a DataLoader over the secret batches keeps."""
    if loader is None:
        return {}
    options = {k: getattr(loader, k) for k in LOADER_OPTIONS if hasattr(loader, k)}
    if options.get("num_workers", 0) == 0:  # torch refuses these without workers
        options.pop("prefetch_factor", None)
        options.pop("persistent_workers", None)
    if hasattr(loader, "generator") and loader.generator is not None:
        options["generator"] = loader.generator  # seeds the workers only; indices come from the secret sampler
    return options


class SecureBatchSampler(TorchSampler[list[int]]):
    """One epoch of the secret sampler's batches as index lists (a DataLoader's ``batch_sampler``)."""

    def __init__(self, sampler: Sampler, epoch: int) -> None:
        self.sampler, self.epoch = sampler, epoch

    def __iter__(self) -> Iterator[list[int]]:
        for _, indices in self.sampler.epoch(self.epoch):
            yield indices.tolist()

    def __len__(self) -> int:
        return self.sampler.steps_per_epoch


class CollateOrEmpty:
    """The user's collate; an empty Poisson batch becomes an empty batch of the dataset's structure."""

    def __init__(self, collate_fn: Callable[[list[Any]], Any], dataset: Dataset[Any]) -> None:
        self.collate_fn, self.dataset = collate_fn, dataset

    def __call__(self, items: list[Any]) -> Any:
        if not items:
            return _empty_like(self.collate_fn([self.dataset[0]]))
        return self.collate_fn(items)


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
        device: torch.device | None = None,
        loader: Any = None,
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
        #: The torch device batches are moved to (the model's); ``None``: left where they are.
        self.device = device
        #: The user's DataLoader settings kept for each epoch's loader (workers, pin_memory...).
        self.options = loader_options(loader if isinstance(loader, DataLoader) else None)
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
        return CollateOrEmpty(self.collate_fn, self.dataset)([self.dataset[int(i)] for i in indices])

    def batches(self, epoch: int) -> Iterator[Any]:
        """Epoch ``epoch``'s batches: tensors indexed directly, or a DataLoader over the secret batches."""
        if isinstance(self.dataset, TensorDataset) and not self.options.get("num_workers"):
            return (self.fetch(indices) for _, indices in self.sampler.epoch(epoch))
        return iter(
            DataLoader(
                self.dataset,
                batch_sampler=SecureBatchSampler(self.sampler, epoch),
                collate_fn=CollateOrEmpty(self.collate_fn, self.dataset),
                **self.options,
            )
        )

    def __iter__(self) -> Iterator[Any]:
        epoch, self.epoch = self.epoch, self.epoch + 1
        non_blocking = bool(self.options.get("pin_memory"))
        for batch in self.batches(epoch):
            if self.should_stop():
                return
            check_finite_tensors(batch, f"data_loader batch of epoch {epoch}")
            inputs = first_tensor(batch)
            self.drawn = BatchMark(rows_of(inputs), fingerprint(inputs))
            yield batch if self.device is None else to_device(batch, self.device, non_blocking)

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
