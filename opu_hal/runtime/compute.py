"""Where a backend computes: ``auto`` / ``cpu`` / ``cuda`` as a torch device."""

from __future__ import annotations

import functools
import importlib.util
import os

import torch

from ..contract.errors import DeviceUnavailable


def resolve_torch_device(requested: str, key: str = "device") -> torch.device:
    """``auto`` -> CUDA when present else CPU; ``cuda`` without CUDA is refused (naming ``key``)."""
    if requested == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda")
    if requested == "cuda":
        raise DeviceUnavailable(
            f'profile asks for {key} = "cuda" but torch sees no CUDA device '
            f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'no'}); "
            f'set {key} = "auto" or "cpu" in the profile'
        )
    return torch.device("cpu")


NO_TRITON_ENV = "OPU_HAL_NO_TRITON"


@functools.lru_cache(maxsize=1)
def _triton_installed() -> bool:
    return importlib.util.find_spec("triton") is not None


def triton_ready(device: torch.device) -> bool:
    """True when ``device`` is CUDA and Triton is installed, so the fused GPU kernels
    (:mod:`opu_hal.kernels.triton_camera`, :mod:`opu_hal.kernels.triton_chacha`) can run there; setting
    ``OPU_HAL_NO_TRITON=1`` keeps the eager torch path (for comparisons)."""
    return device.type == "cuda" and _triton_installed() and not os.environ.get(NO_TRITON_ENV)


NO_NUMBA_ENV = "OPU_HAL_NO_NUMBA"


@functools.lru_cache(maxsize=1)
def _numba_installed() -> bool:
    return importlib.util.find_spec("numba") is not None


def compiled_ready(device: torch.device) -> bool:
    """True when ``device`` is the CPU and Numba is installed, so the simulated camera's compiled
    kernels (:mod:`opu_hal.kernels.compiled`) can run; setting ``OPU_HAL_NO_NUMBA=1`` keeps the eager torch
    path (for comparisons, or a machine without Numba)."""
    return device.type == "cpu" and _numba_installed() and not os.environ.get(NO_NUMBA_ENV)
