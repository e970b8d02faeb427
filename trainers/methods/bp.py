"""Backpropagation, the baseline (paper 000, eq. 2; paper 002, eq. 2-4)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .base import Method, StepOutput


class Backprop(Method):
    name = "bp"
    any_network = True
    trains_cnn = True

    def compute_gradients(self, x: torch.Tensor, y: torch.Tensor) -> StepOutput:
        logits = self.model(x)
        loss = F.cross_entropy(logits, y, reduction="sum")
        (loss / y.shape[0]).backward()
        return StepOutput(float(loss.detach()), int((logits.argmax(1) == y).sum()), int(y.shape[0]))
