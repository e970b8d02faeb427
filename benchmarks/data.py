"""FashionMNIST for the benchmarks, or random data of the same shape when it is not installed."""

from __future__ import annotations

import sys

import torch

from trainers.core.data import Dataset, DatasetError, Split, load_dataset


def fashion_or_random(train: int) -> Dataset:
    """The first ``train`` training examples of FashionMNIST (timings do not depend on content)."""
    try:
        data = load_dataset("fashion-mnist")
        return Dataset(data.name, Split(data.train.x[:train], data.train.y[:train]), data.validation, data.test)
    except DatasetError as exc:
        print(f"note: FashionMNIST not found ({exc}); timing on random data of the same shape", file=sys.stderr)
        g = torch.Generator().manual_seed(0)

        def split(n: int) -> Split:
            return Split(torch.rand(n, 784, generator=g), torch.randint(0, 10, (n,), generator=g))

        return Dataset("random", split(train), split(1000), split(1000))
