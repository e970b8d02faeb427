"""Where a backend computes: ``auto`` / ``cpu`` / ``cuda`` as a torch device."""

from __future__ import annotations

import torch

from .errors import DeviceUnavailable


def resolve_torch_device(requested: str, key: str = "device") -> torch.device:
    """``auto`` -> CUDA when present else CPU; ``cuda`` without CUDA is refused (naming ``key``)."""
    if requested == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda")
    if requested == "cuda":
        raise DeviceUnavailable(
            f"profile asks for {key} = \"cuda\" but torch sees no CUDA device "
            f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'no'}); "
            f"set {key} = \"auto\" or \"cpu\" in the profile"
        )
    return torch.device("cpu")
