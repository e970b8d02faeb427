"""GroupNorm, LayerNorm and affine InstanceNorm: the output is ``gamma * x_hat + beta`` with
``x_hat`` normalised within one example, so example ``i``'s gradients are in closed form:
``d gamma = sum g_i x_hat_i`` and ``d beta = sum g_i`` over the positions that share a parameter
(channels' spatial positions; LayerNorm's leading dimensions). ``x_hat`` is recomputed from the
recorded input; the per-example gradients are small (one value per parameter) and are formed.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ...core.formed import row_squares

Norm = nn.GroupNorm | nn.LayerNorm | nn.InstanceNorm1d | nn.InstanceNorm2d


def normalized(layer: Norm, a: torch.Tensor) -> torch.Tensor:
    """``x_hat``: the input normalised as ``layer`` normalises it, before its affine map."""
    if isinstance(layer, nn.GroupNorm):
        return F.group_norm(a, layer.num_groups, eps=layer.eps)
    if isinstance(layer, nn.LayerNorm):
        return F.layer_norm(a, layer.normalized_shape, eps=layer.eps)
    return F.instance_norm(a, eps=layer.eps)  # per-example statistics (running statistics are refused)


def per_example_grads(layer: Norm, a: torch.Tensor, g: torch.Tensor) -> dict[str, torch.Tensor]:
    """Each example's ``weight`` and ``bias`` gradients, ``(n, *parameter shape)``."""
    n = a.shape[0]
    products = g * normalized(layer, a)
    if isinstance(layer, nn.LayerNorm):
        shape = (n, -1, *layer.normalized_shape)
        return {"weight": products.reshape(shape).sum(1), "bias": g.reshape(shape).sum(1)}
    channels = a.shape[1]
    return {"weight": products.reshape(n, channels, -1).sum(2), "bias": g.reshape(n, channels, -1).sum(2)}


def norm_squared_norms(layer: Norm, grads: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {name: row_squares(grad) for name, grad in grads.items()}


def norm_clipped_sums(layer: Norm, grads: dict[str, torch.Tensor], scale: torch.Tensor) -> dict[str, torch.Tensor]:
    return {name: torch.tensordot(scale, grad, dims=1) for name, grad in grads.items()}
