"""A batch is charged as what it was: the private loader marks each batch it draws (its size and a
cheap fingerprint of its first tensor), a hook marks what the model was run on, and the optimizer
releases an update only when the examples behind it are that batch, once.

The accountant charges a step as one secretly sampled batch (Abadi et al. 2016; Lee & Kifer,
Algorithm 1 line 5). ``loss.backward()`` on the whole dataset, on a batch of the user's own, or a
second step on one drawn batch would be charged as a sampled batch and under-report epsilon."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..core.errors import BatchMismatchError


@dataclass(frozen=True)
class BatchMark:
    """How many examples a batch holds, and the fingerprint of its inputs (None when not a tensor)."""

    size: int
    fingerprint: tuple[int, float, float] | None


def fingerprint(tensor: Any) -> tuple[int, float, float] | None:
    """Element count, sum and sum of squares in float64: unchanged by ``.to(device)``, ``.float()``
    and reshapes; changed by another batch."""
    if not isinstance(tensor, torch.Tensor) or tensor.is_complex() or tensor.device.type == "meta":
        return None
    flat = tensor.detach().reshape(-1).to("cpu", torch.float64)
    return flat.numel(), float(flat.sum()), float(flat.square().sum())


def first_tensor(batch: Any) -> Any:
    """The inputs of a batch: the tensor itself, or the first entry of a tuple or list."""
    if isinstance(batch, (tuple, list)) and batch:
        return batch[0]
    return batch


def same_fingerprint(a: tuple[int, float, float], b: tuple[int, float, float]) -> bool:
    return a[0] == b[0] and all(math.isclose(x, y, rel_tol=1e-5, abs_tol=1e-6) for x, y in zip(a[1:], b[1:]))


class InputWatch:
    """A forward pre-hook on the model: the mark of the input of its last forward pass with gradients."""

    def __init__(self, model: nn.Module) -> None:
        self.seen: BatchMark | None = None
        self._handle = model.register_forward_pre_hook(self._watch)

    def _watch(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        if not torch.is_grad_enabled():  # an evaluation pass leaves the training batch's mark
            return
        x = args[0] if args else None
        size = int(x.shape[0]) if isinstance(x, torch.Tensor) and x.dim() > 0 else -1
        self.seen = BatchMark(size, fingerprint(x))

    def remove(self) -> None:
        self._handle.remove()


def check_batch(drawn: BatchMark | None, seen: BatchMark | None, examples: int) -> None:
    """Refuse a release whose examples are not the batch the loader drew, naming the cause.

    ``drawn``: the loader's mark of the batch it last yielded and no step has released (None: none);
    ``seen``: the model's last input; ``examples``: the per-example rows behind the update."""
    if drawn is None:
        raise BatchMismatchError(
            "optimizer.step(): no batch was drawn from the private loader since the last step; each step "
            "releases the update of one batch the loader drew (iterate the loader make_private returned)"
        )
    if examples != drawn.size:
        raise BatchMismatchError(
            f"optimizer.step(): the update holds {examples} example(s) but the private loader drew a batch of "
            f"{drawn.size}; it would be charged as a sampled batch it is not: call loss.backward() on the "
            "model's output for the loader's batch only"
        )
    compared = seen is not None and seen.size == drawn.size and None not in (seen.fingerprint, drawn.fingerprint)
    if compared and not same_fingerprint(seen.fingerprint, drawn.fingerprint):  # type: ignore[arg-type,union-attr]
        raise BatchMismatchError(
            f"optimizer.step(): the model's input is not the batch of {drawn.size} the private loader drew "
            "(its values differ); run the model on the loader's batch as drawn (transform inside the model "
            "or the dataset)"
        )
