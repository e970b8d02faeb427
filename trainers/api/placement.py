"""Where things live: the OPU is ``opu=`` (a profile name, a path or an opu_hal device); the torch
device is the model's own (``model.to("cuda")``), and batches, noise and feedback follow it.

``device=`` named the OPU before ``opu=`` existed; it still works, with a ``DeprecationWarning``.
A torch device name given there (``"cuda"``, ``"cpu"``) is refused with the fix, where it used to
be ignored or read as a profile name.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import nn

from opu_hal import Device

from .layers import UnsupportedModelError

TORCH_DEVICE_KINDS = ("cpu", "cuda", "mps", "xpu", "meta")


def _is_torch_device(value: object) -> bool:
    if isinstance(value, torch.device):
        return True
    return isinstance(value, str) and value.split(":")[0] in TORCH_DEVICE_KINDS


def resolve_opu(
    opu: Device[Any] | str | None, device: Device[Any] | str | None, where: str
) -> Device[Any] | str | None:
    """The OPU to open: ``opu``, or the deprecated ``device`` keyword's value (with a warning)."""
    if device is None:
        if _is_torch_device(opu):
            raise UnsupportedModelError(
                f"{where}(opu={opu!r}): opu= names an OPU profile or device, not a torch device"
            )
        return opu
    if _is_torch_device(device):
        raise UnsupportedModelError(
            f"{where}(device={device!r}): the torch device is the model's; call model.to({str(device)!r}) "
            "before wrapping it. The OPU is opu= (a profile name, a path or an opu_hal device)"
        )
    if opu is not None:
        raise UnsupportedModelError(f"{where}: give opu= only (device= is its deprecated old name), not both")
    warnings.warn(
        f"{where}(device=...) is deprecated: the OPU is opu= (a profile name, a path or an opu_hal device); "
        "the torch device is the model's own",
        DeprecationWarning,
        stacklevel=3,
    )
    return device


def model_device(module: nn.Module) -> torch.device:
    """The torch device of ``module``'s parameters (or buffers); CPU for a module with neither.
    A module spread over several devices is refused: one device runs the private update."""
    devices = {t.device for t in (*module.parameters(), *module.buffers())}
    if len(devices) > 1:
        raise UnsupportedModelError(
            f"{type(module).__name__} has tensors on {sorted(map(str, devices))}: move it to one device (model.to(...))"
        )
    return devices.pop() if devices else torch.device("cpu")


def to_device(batch: Any, device: torch.device, non_blocking: bool = False) -> Any:
    """``batch`` (tensors, or tuples, lists and dicts of them) on ``device``; other leaves unchanged."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a namedtuple
        return type(batch)(*(to_device(b, device, non_blocking) for b in batch))
    if isinstance(batch, (tuple, list)):
        return type(batch)(to_device(b, device, non_blocking) for b in batch)
    if isinstance(batch, dict):
        return {k: to_device(v, device, non_blocking) for k, v in batch.items()}
    return batch
