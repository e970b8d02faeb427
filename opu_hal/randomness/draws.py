"""Draws from a secure numpy generator (:mod:`.secure_random`) as torch tensors and index sets:
normals and uniforms for per-step privacy noise, and Poisson or fixed-size batch indices."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np
import torch

if TYPE_CHECKING:
    from .keyed_stream import KeyedStream


def torch_normal(
    generator: np.random.Generator | KeyedStream, shape: Sequence[int], dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """I.i.d. N(0, 1) values of ``shape`` from ``generator`` (numpy's ziggurat, or a compiled keyed
    stream's float32 one) as a CPU tensor."""
    wide = dtype == torch.float64
    values = generator.standard_normal(tuple(shape), dtype=np.float64 if wide else np.float32)
    return torch.from_numpy(values).to(dtype)


def torch_uniform(generator: np.random.Generator, n: int) -> torch.Tensor:
    """``n`` i.i.d. uniforms in [0, 1) (float64) from ``generator``."""
    return torch.from_numpy(generator.random(n))


class IndexSource(Protocol):
    """What the index draws below read: numpy's generator, or a compiled keyed stream
    (:class:`opu_hal.randomness.keyed_stream.KeyedStream`)."""

    def random(self, n: int) -> np.ndarray: ...
    def choice(self, n: int, size: int, replace: bool = ...) -> np.ndarray: ...
    def permutation(self, n: int) -> np.ndarray: ...


def bernoulli_indices(generator: IndexSource, n: int, rate: float) -> torch.Tensor:
    """Sorted indices of ``range(n)``, each kept independently with probability ``rate`` (Poisson
    subsampling)."""
    return torch.from_numpy(np.flatnonzero(generator.random(n) < rate)).long()


def sample_without_replacement(generator: IndexSource, n: int, k: int) -> torch.Tensor:
    """``k`` distinct indices of ``range(n)``, uniformly at random, in random order."""
    return torch.from_numpy(generator.choice(n, size=k, replace=False)).long()


def permutation(generator: IndexSource, n: int) -> torch.Tensor:
    """A uniformly random permutation of ``range(n)``."""
    return torch.from_numpy(generator.permutation(n)).long()
