"""The per-example gradient rule of each supported layer type (exact types: a subclass may change
``forward`` and with it the gradient, so it is not assumed to follow its parent's rule)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ...core.conv_per_example import conv_clipped_sums, conv_prepare, conv_squared_norms
from .embedding import embedding_clipped_sums, embedding_prepare, embedding_squared_norms
from .linear import linear_clipped_sums, linear_prepare, linear_squared_norms
from .norms import norm_clipped_sums, norm_squared_norms, per_example_grads

Grads = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Rule:
    """``prepare(layer, a, g)``: what the layer's step needs from its input ``a`` and the per-example
    loss gradient ``g`` at its output (computed once per step); ``squared_norms(layer, prepared)``:
    per parameter name, ``(n,)`` squared norms of each example's gradient;
    ``clipped_sums(layer, prepared, scale)``: per name, ``sum_i scale_i grad_i`` in the parameter's shape."""

    prepare: Callable[[Any, torch.Tensor, torch.Tensor], Any]
    squared_norms: Callable[[Any, Any], Grads]
    clipped_sums: Callable[[Any, Any, torch.Tensor], Grads]


LINEAR = Rule(linear_prepare, linear_squared_norms, linear_clipped_sums)
CONV = Rule(conv_prepare, conv_squared_norms, conv_clipped_sums)
NORM = Rule(per_example_grads, norm_squared_norms, norm_clipped_sums)
EMBEDDING = Rule(embedding_prepare, embedding_squared_norms, embedding_clipped_sums)

RULES: dict[type[nn.Module], Rule] = {
    nn.Linear: LINEAR,
    nn.Conv1d: CONV,
    nn.Conv2d: CONV,
    nn.GroupNorm: NORM,
    nn.LayerNorm: NORM,
    nn.InstanceNorm1d: NORM,
    nn.InstanceNorm2d: NORM,
    nn.Embedding: EMBEDDING,
}


def rule_for(module: nn.Module) -> Rule | None:
    """The rule of ``module``'s exact type, or None."""
    return RULES.get(type(module))


def trainable_params(module: nn.Module) -> dict[str, nn.Parameter]:
    """``module``'s own trainable parameters by name (``weight``, ``bias``), in registration order."""
    return {name: p for name, p in module.named_parameters(recurse=False) if p.requires_grad}
