"""Non-private probe: do more wavelet orientations, or other channel groups, lift the ScatterNet
features' linear ceiling on FashionMNIST? (A ScatterNet variant for the DP-SGD records, docs/records.md.)

    python -m scripts.analysis.scatter_orientations

For J = 2 and L = 8, 12 and 16 orientations (81, 169 and 289 channels of 7 x 7), each image's
coefficients are group-normalised (:func:`trainers.core.scattering.group_normalize`) with two group
counts, and a linear model is fitted without privacy on the 54 000 training images
(:func:`scripts.analysis.scatter_power.linear_validation_accuracy`, the probe the square-root variant
was judged by); prints the validation accuracy of each. Two threads, about 10 minutes.
"""

from __future__ import annotations

import time

import torch

from scripts.analysis.scatter_power import linear_validation_accuracy
from trainers.core import scattering
from trainers.core.data import Split, load_dataset

VARIANTS = ((8, (27, 81)), (12, (13, 169)), (16, (17, 289)))  # orientations, group counts dividing the channels


def coefficients(transform: scattering.Scattering2D, split: Split) -> torch.Tensor:
    """The scattering coefficients of a split of flattened 28 x 28 images, ``(n, channels, 7, 7)``."""
    with torch.no_grad():
        return torch.cat([transform(part.reshape(-1, 28, 28)) for part in split.x.split(1000)])


def main() -> None:
    torch.manual_seed(0)
    data = load_dataset("fashion-mnist")
    for orientations, group_counts in VARIANTS:
        transform = scattering.Scattering2D(28, 2, orientations)
        started = time.perf_counter()
        train, validation = coefficients(transform, data.train), coefficients(transform, data.validation)
        print(
            f"L={orientations}: coefficients {tuple(train.shape)} in {time.perf_counter() - started:.0f} s", flush=True
        )
        for groups in group_counts:
            accuracy = linear_validation_accuracy(
                Split(scattering.group_normalize(train, groups).flatten(1), data.train.y),
                Split(scattering.group_normalize(validation, groups).flatten(1), data.validation.y),
            )
            print(f"  L={orientations} groups={groups}: validation accuracy {accuracy:.4f}", flush=True)


if __name__ == "__main__":
    main()
