"""Gradient alignment: cosine between a method's update and the BP gradient, per layer
(paper 000, Figure 2 right)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..methods.base import Method


def _weight_grads(method: Method) -> list[torch.Tensor]:
    grads = [layer.weight.grad for layer in method.model.layers]
    if any(g is None for g in grads):
        raise RuntimeError(f"{method.name}: a layer received no gradient from compute_gradients")
    return [g.detach().clone() for g in grads if g is not None]


def gradient_alignment(method: Method, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    """Cosine similarity, per weight matrix, of ``method``'s gradient and backprop's on ``(x, y)``.

    Leaves every ``.grad`` cleared. The output layer gets the same update under BP and DFA, so
    its cosine is 1 up to noise; the hidden layers are the informative ones.
    """
    model = method.model
    model.zero_grad(set_to_none=True)
    method.compute_gradients(x, y)
    ours = _weight_grads(method)
    model.zero_grad(set_to_none=True)
    F.cross_entropy(model(x), y).backward()
    reference = _weight_grads(method)
    model.zero_grad(set_to_none=True)
    return {
        name: float(F.cosine_similarity(a.flatten(), b.flatten(), dim=0))
        for name, a, b in zip(model.layer_names(), ours, reference)
    }
