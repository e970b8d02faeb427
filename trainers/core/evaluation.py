"""Loss and accuracy of a model on a whole split, in chunks."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .data import Split


@torch.no_grad()
def evaluate(model: torch.nn.Module, split: Split, chunk: int = 8192) -> tuple[float, float]:
    """Mean cross-entropy and accuracy (a fraction in [0, 1])."""
    if len(split) == 0:
        return float("nan"), float("nan")
    loss, correct = 0.0, 0
    for start in range(0, len(split), chunk):
        x, y = split.x[start : start + chunk], split.y[start : start + chunk]
        logits = model(x)
        loss += float(F.cross_entropy(logits, y, reduction="sum"))
        correct += int((logits.argmax(1) == y).sum())
    return loss / len(split), correct / len(split)
