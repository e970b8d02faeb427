"""ScatterNet features computed once per dataset and kept on disk.

The key is a SHA-256 of every split's images and labels plus the transform's version, so a changed
dataset, split or transform never reads stale features. The file also holds a SHA-256 of its own
tensors' bytes, checked at load: a damaged file (one flipped byte) is recomputed, never used. The cache lives in ``$OPU_HAL_CACHE``
(default ``~/.cache/opu-hal``); a cache that cannot be written costs time, never the run.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from tqdm import tqdm

from opu_hal.runtime.cache import cache_dir

from .data import Dataset, Split
from .scattering import scatter_dataset

SCATTER_VERSION = "scatter-j2-l8-gn27-v3"  # v3: kymatio's low-pass and padding


def dataset_key(data: Dataset) -> str:
    digest = hashlib.sha256(SCATTER_VERSION.encode())
    for split in (data.train, data.validation, data.test):
        for tensor in (split.x, split.y):
            digest.update(str(tuple(tensor.shape)).encode())
            digest.update(tensor.contiguous().numpy().tobytes())
    return digest.hexdigest()[:24]


TENSOR_NAMES = tuple(f"{name}_{part}" for name in ("train", "validation", "test") for part in ("x", "y"))


def tensors_digest(tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 of the feature tensors' names, dtypes, shapes and bytes, in a fixed order."""
    digest = hashlib.sha256()
    for name in TENSOR_NAMES:
        tensor = tensors[name].detach().cpu().contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(tensor.view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


def _load(path: Path, data: Dataset) -> Dataset | None:
    """The cached features, or None when the file is truncated, foreign, damaged (checksum) or stale."""
    try:
        stored = torch.load(path, weights_only=True)
        tensors = {name: stored["tensors"][name] for name in TENSOR_NAMES}
        if stored["sha256"] != tensors_digest(tensors):
            return None  # damaged since it was written: recompute (and overwrite it)
        splits = [Split(tensors[f"{name}_x"], tensors[f"{name}_y"]) for name in ("train", "validation", "test")]
    except Exception:  # a truncated or foreign file: recompute (and overwrite it)
        return None
    if any(len(s) != len(o) for s, o in zip(splits, (data.train, data.validation, data.test))):
        return None
    return data.with_splits(*splits)


def _store(path: Path, features: Dataset) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.part")
    tensors = {
        f"{name}_{part}": getattr(getattr(features, name), part)
        for name in ("train", "validation", "test")
        for part in ("x", "y")
    }
    torch.save({"tensors": tensors, "sha256": tensors_digest(tensors)}, partial)
    os.replace(partial, path)


def cached_scatter_features(data: Dataset, log: Callable[[str], None], progress: bool = True) -> Dataset:
    """``data`` with ScatterNet features in place of pixels, from the cache when it holds them."""
    path = cache_dir() / f"{dataset_key(data)}.{SCATTER_VERSION}.pt"
    if path.is_file():
        cached = _load(path, data)
        if cached is not None:
            # The file's name is a digest of the data, private data included: it stays in the cache
            # (as secret as the data) and out of the log.
            log(f"features: ScatterNet features from the cache in {path.parent}")
            return cached
    total = len(data.train) + len(data.validation) + len(data.test)
    log(
        f"features: computing ScatterNet features of {total} images (J=2, L=8; about 1 ms an image "
        "on 2 cores; cached afterwards)"
    )
    started = time.perf_counter()
    bar = tqdm(
        total=total,
        desc="scattering",
        unit="img",
        leave=False,
        file=sys.stderr,
        disable=not (progress and sys.stderr.isatty()),
        dynamic_ncols=True,
    )
    with bar:
        features = scatter_dataset(data, progress=bar.update)
    log(f"features: {features.n_features} per image in {time.perf_counter() - started:.0f} s")
    try:
        _store(path, features)
    except OSError as error:
        log(f"features: not cached ({path.parent}: {error.strerror or error})")
    return features
