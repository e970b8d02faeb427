"""Non-private probe: do horizontally flipped training images, added as data, lift a linear model on
ScatterNet features above the same model without them? (A test of whether augmentation could raise
the ceiling that limits DP-SGD's records, docs/records.md.)

    python -m scripts.analysis.flip_probe

FashionMNIST's 54 000 training images and their mirror images (features computed here, about 6 min
on 2 cores; the originals' come from the feature cache); features centred on the originals' mean;
a linear model 3969-10 trained by SGD with momentum 0.9, batch 8192, 30 epochs, without and with the
flipped copies, at two learning rates; prints the test accuracy of each.
"""

from __future__ import annotations

import time

import torch

from scripts.analysis.flip_symmetric import mirrored
from trainers.core.data import Split, load_dataset
from trainers.core.feature_cache import cached_scatter_features
from trainers.core.scattering import Scattering2D, scatter_split


def fit(x: torch.Tensor, y: torch.Tensor, test: Split, mean: torch.Tensor, lr: float, epochs: int = 30) -> float:
    """Test accuracy of a linear model trained on ``(x, y)`` (centred on ``mean``)."""
    w = torch.zeros(x.shape[1], 10, requires_grad=True)
    b = torch.zeros(10, requires_grad=True)
    optimizer = torch.optim.SGD([w, b], lr=lr, momentum=0.9)
    for _ in range(epochs):
        for idx in torch.randperm(x.shape[0]).split(8192):
            loss = torch.nn.functional.cross_entropy((x[idx] - mean) @ w + b, y[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        return float((((test.x - mean) @ w + b).argmax(1) == test.y).float().mean())


def main() -> None:
    torch.manual_seed(0)
    data = load_dataset("fashion-mnist")
    features = cached_scatter_features(data, print, progress=False)
    mirror_images = mirrored(data.train)
    started = time.perf_counter()
    flipped = scatter_split(mirror_images, Scattering2D(28))
    print(f"features of the flipped images: {time.perf_counter() - started:.0f} s", flush=True)
    mean = features.train.x.mean(0)
    both_x, both_y = torch.cat([features.train.x, flipped.x]), torch.cat([features.train.y, flipped.y])
    for lr in (0.5, 2.0):
        plain = fit(features.train.x, features.train.y, features.test, mean, lr)
        augmented = fit(both_x, both_y, features.test, mean, lr)
        print(f"lr {lr}: without flips {plain:.4f}, with flips {augmented:.4f}", flush=True)


if __name__ == "__main__":
    main()
