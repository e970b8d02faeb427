"""Checks a batch against a device before it is projected; failures raise :class:`InputError`."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .capabilities import Capabilities
from .errors import InputError

_ALLOWED_VALUES = {"binary": (0.0, 1.0), "ternary": (-1.0, 0.0, 1.0)}
_INTEGER_DTYPES = {torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64}


def as_batch(x: Any) -> torch.Tensor:
    """``x`` as a tensor, without copying a tensor that is already one."""
    if isinstance(x, torch.Tensor):
        return x
    try:
        return torch.as_tensor(np.asarray(x))
    except (TypeError, ValueError, RuntimeError) as exc:
        raise InputError(f"cannot read the batch as a tensor ({type(x).__name__}): {exc}") from None


def check_batch(x: Any, in_features: int, capabilities: Capabilities) -> torch.Tensor:
    """Validate rank, width, dtype, finiteness and value kind; return the batch as a tensor."""
    batch = as_batch(x)
    if batch.is_sparse or batch.layout != torch.strided:
        raise InputError(f"sparse batches ({batch.layout}) are not accepted; pass x.to_dense()")
    if batch.is_meta:
        raise InputError("a meta tensor holds no values to project; pass a batch with data")
    expected = f"(n, {in_features})"
    if batch.ndim != 2:
        raise InputError(f"expected a batch of shape {expected}, got shape {tuple(batch.shape)}")
    n, width = batch.shape
    if n == 0:
        raise InputError(f"expected a batch of shape {expected} with n >= 1, got an empty batch")
    if capabilities.max_batch is not None and n > capabilities.max_batch:
        raise InputError(
            f"batch has {n} rows but this device takes at most {capabilities.max_batch} per call "
            "(derived from the host's available memory); split it"
        )
    limit = capabilities.max_in_features
    if limit is not None and width > limit:
        raise InputError(
            f"batch has {width} features but the device supports at most {limit} "
            f"(this profile is configured for {in_features}); expected shape {expected}"
        )
    if width != in_features:
        raise InputError(f"expected a batch of shape {expected}, got shape {tuple(batch.shape)}")
    if batch.is_complex() or not (batch.is_floating_point() or batch.dtype in _INTEGER_DTYPES):
        raise InputError(f"expected real numbers, got dtype {batch.dtype}")
    _check_values(batch, capabilities.input_kind)
    if batch.dtype in (torch.bfloat16, torch.float16):
        batch = batch.float()  # every backend computes in float32 or wider
    return batch


def _check_values(batch: torch.Tensor, kind: str) -> None:
    """Finite values, and of the device's input kind: both flags read in one synchronization (a
    GPU batch otherwise waits twice for the device before its projection is queued)."""
    allowed = _ALLOWED_VALUES.get(kind)
    flags = []
    if batch.is_floating_point():
        flags.append((~torch.isfinite(batch)).any())
    if allowed is not None:
        flags.append((~_allowed(batch, allowed)).any())
    if not flags or not any(torch.stack(flags).tolist()):
        return
    if batch.is_floating_point():
        bad = ~torch.isfinite(batch)
        if bool(bad.any()):
            where = tuple(int(i) for i in bad.nonzero()[0])
            raise InputError(
                f"batch holds {int(bad.sum())} NaN/inf value(s), first at index {where}: {batch[where].item()}"
            )
    if allowed is not None:
        _refuse_kind(batch, kind, allowed)


def _refuse_kind(batch: torch.Tensor, kind: str, allowed: tuple[float, ...]) -> None:
    """Name the first value outside ``allowed`` (the batch is known to hold one)."""
    where = tuple(int(i) for i in (~_allowed(batch, allowed)).nonzero()[0])
    hint = "; project ternary errors with opu_hal.project_ternary" if kind == "binary" else ""
    raise InputError(
        f"{kind}-input device accepts only values in {{{', '.join(f'{v:g}' for v in allowed)}}}, "
        f"got {batch[where].item()} at index {where}{hint}"
    )


def _allowed(batch: torch.Tensor, allowed: tuple[float, ...]) -> torch.Tensor:
    """Which entries of ``batch`` are one of ``allowed``."""
    ok = torch.zeros_like(batch, dtype=torch.bool)
    for value in allowed:
        ok |= batch == value
    return ok
