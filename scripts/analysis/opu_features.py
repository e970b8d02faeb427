"""Random features computed on the (simulated) OPU itself as a feature map for a private linear model:
does the device's own projection lift the ceiling of the ScatterNet features?

    python -m scripts.analysis.opu_features probe

Each image is encoded on ``LEVELS`` binary planes (a thermometer code: pixel > 1/4, > 2/4, > 3/4, the
OPU takes 0/1 inputs), projected by the simulated OPU in intensity mode (``|B x|^2``, one camera frame
an image, the profile ``opu-sim-intensity`` with ``OPU_FEATURES`` outputs, default 4096, and
``OPU_EXPOSURE_US`` exposure, default 1000 us: 2.5 times the profile's, the longest at which almost no
camera pixel saturates on these inputs), square-rooted (the field's amplitude) and normalised per image to norm ``sqrt(D)`` like the
group-normalised ScatterNet features. Like those, the map is fixed and per image: no data statistics,
no privacy cost (its random medium is public; the shot noise is the device's).

``probe`` fits a linear model without privacy (Adam 1e-3, batch 1024, 40 epochs, one thread; the fit
of :mod:`scripts.analysis.scatter_power`) on the FashionMNIST training split's features and prints the
validation accuracy of the ScatterNet features, of the OPU features, and of the two concatenated.
A feature map that does not lift the non-private ceiling cannot lift the private one
(docs/records.md has what it measured).
"""

from __future__ import annotations

import os
import sys
import time

import torch

import opu_hal
from opu_hal.contract.profile_base import BaseProfile
from scripts.analysis.scatter_power import linear_validation_accuracy
from trainers.core.data import Split, load_dataset
from trainers.core.feature_cache import cached_scatter_features

LEVELS = 3


def thermometer(x: torch.Tensor, levels: int = LEVELS) -> torch.Tensor:
    """``(n, 784)`` pixels in [0, 1] as ``(n, 784 * levels)`` bits: plane ``k`` is ``x > k / (levels + 1)``."""
    return torch.cat([(x > k / (levels + 1)).float() for k in range(1, levels + 1)], dim=1)


def device_profile(features: int, exposure_us: float, in_features: int) -> BaseProfile:
    """``opu-sim-intensity`` with ``features`` outputs, ``in_features`` inputs and the exposure, validated."""
    base = opu_hal.load_profile("opu-sim-intensity")
    changes = {"out_features": features, "in_features": in_features, "exposure_us": exposure_us}
    return type(base).model_validate({**base.model_dump(), **changes})


def per_image_normalized(z: torch.Tensor) -> torch.Tensor:
    """Each row scaled to norm ``sqrt(D)`` (the ScatterNet features' radius after the group norm)."""
    return z * (z.shape[1] ** 0.5 / z.norm(dim=1, keepdim=True).clamp_min(1e-12))


def opu_features(splits: list[Split], features: int, exposure_us: float) -> list[torch.Tensor]:
    """The normalised amplitudes ``sqrt(|B x|^2)`` of every split's thermometer-coded images, on one device."""
    with opu_hal.load_device(device_profile(features, exposure_us, 784 * LEVELS)) as device:
        out = []
        for split in splits:
            frames = [device.project(thermometer(part)).values for part in split.x.split(1000)]
            out.append(per_image_normalized(torch.cat(frames).clamp_min(0).sqrt()))
        return out


def probe() -> None:
    """The non-private comparison of the module docstring."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    features = int(os.environ.get("OPU_FEATURES", "4096"))
    exposure = float(os.environ.get("OPU_EXPOSURE_US", "1000"))
    pixels = load_dataset("fashion-mnist")
    scatter = cached_scatter_features(pixels, log=lambda message: None, progress=False)
    started = time.perf_counter()
    opu_train, opu_val = opu_features([pixels.train, pixels.validation], features, exposure)
    print(f"OPU features: {features} an image at {exposure:g} us, {time.perf_counter() - started:.0f} s", flush=True)
    sets = {
        "ScatterNet": (scatter.train.x, scatter.validation.x),
        "OPU": (opu_train, opu_val),
        "ScatterNet + OPU": (torch.cat([scatter.train.x, opu_train], 1), torch.cat([scatter.validation.x, opu_val], 1)),
    }
    for name, (train, validation) in sets.items():
        accuracy = linear_validation_accuracy(Split(train, pixels.train.y), Split(validation, pixels.validation.y))
        print(f"{name} ({train.shape[1]} features): validation accuracy {accuracy:.4f}", flush=True)


if __name__ == "__main__" and sys.argv[1:2] == ["probe"]:
    probe()
elif __name__ == "__main__":
    sys.exit(f"usage: python -m scripts.analysis.opu_features probe ({__doc__.splitlines()[0]})")
