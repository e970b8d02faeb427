"""DP-SGD on power-normalised ScatterNet features: the square root of each coefficient before the
group norm.

    python -m scripts.analysis.scatter_power train --dataset fashion-mnist --features scatter ...
    python -m scripts.analysis.scatter_power probe   # the same without privacy, against the plain features

Runs ``opu-hal train`` (every argument is passed on) with the ScatterNet features computed as
``group_normalize(sqrt(S x))`` in place of ``group_normalize(S x)`` (:mod:`trainers.core.scattering`):
the coefficients are non-negative and heavy-tailed, and a square root (the power normalisation of
Fisher vectors, Perronnin et al. 2010) evens them out before the linear model. Like the features it
replaces, the map is fixed and per image (no data statistics, no privacy cost), and the group norm
leaves each image's features at norm ``sqrt(3969)``, the radius the centring's release is charged
for (:func:`trainers.core.centering.feature_radius`). They are cached under their own version name.
``probe`` fits a linear model without privacy (Adam 1e-3, batch 1024, 40 epochs, one thread) on the
FashionMNIST training split's plain and square-rooted features and prints each one's validation
accuracy (about 5 min). (docs/records.md has what both measured; not kept as a feature option.)
"""

from __future__ import annotations

import sys

import torch

import trainers.core.feature_cache as feature_cache
import trainers.core.scattering as scattering
from trainers.cli import main as cli_main
from trainers.core.data import Split, load_dataset

_group_normalize = scattering.group_normalize


def sqrt_group_normalize(
    coefficients: torch.Tensor, groups: int = scattering.GROUPS, eps: float = 1e-6
) -> torch.Tensor:
    """:func:`trainers.core.scattering.group_normalize` of the coefficients' square roots."""
    return _group_normalize(coefficients.clamp_min(0).sqrt(), groups, eps)


def linear_validation_accuracy(train: Split, validation: Split, epochs: int = 40) -> float:
    """Validation accuracy of a linear model fitted without privacy on centred features."""
    mean = train.x.mean(0)
    x, x_val = train.x - mean, validation.x - mean
    weight = torch.zeros(x.shape[1], 10, requires_grad=True)
    bias = torch.zeros(10, requires_grad=True)
    optimizer = torch.optim.Adam([weight, bias], lr=1e-3)
    for _ in range(epochs):
        for batch in torch.randperm(len(x)).split(1024):
            loss = torch.nn.functional.cross_entropy(x[batch] @ weight + bias, train.y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        return float(((x_val @ weight + bias).argmax(1) == validation.y).float().mean())


def probe() -> None:
    """The non-private comparison of the module docstring."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    data = load_dataset("fashion-mnist")
    transform = scattering.Scattering2D(28)

    def coefficients(split: Split) -> torch.Tensor:
        with torch.no_grad():
            return torch.cat([transform(part.reshape(-1, 28, 28)) for part in split.x.split(1000)])

    train, validation = coefficients(data.train), coefficients(data.validation)
    for name, normalize in (("plain", _group_normalize), ("square root", sqrt_group_normalize)):
        accuracy = linear_validation_accuracy(
            Split(normalize(train).flatten(1), data.train.y), Split(normalize(validation).flatten(1), data.validation.y)
        )
        print(f"{name}: validation accuracy {accuracy:.4f}", flush=True)


if __name__ == "__main__" and sys.argv[1:2] == ["probe"]:
    probe()
elif __name__ == "__main__":
    scattering.group_normalize = sqrt_group_normalize
    feature_cache.SCATTER_VERSION = f"{feature_cache.SCATTER_VERSION}-sqrt"
    sys.exit(cli_main(sys.argv[1:]))
