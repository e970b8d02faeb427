"""Per-example gradient norms and clipped sums of linear and 3x3 conv layers, never materialising
a per-example gradient of a linear layer (shared by DP-SGD and DP-DFA's hybrid CNN).

Linear layer with input ``a_i`` and output gradient ``g_i``: ``||g_i a_i^T||_F = ||g_i|| ||a_i||``
and the clipped sum is ``(c * G)^T A`` ("ghost clipping"). Convolution: ``G_i = g_i U_i^T`` with
``U_i`` the input patches as the conv reads them, by the rule the API's ``make_private`` uses
(:mod:`trainers.core.conv_per_example`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from .conv_per_example import conv_clipped_sums, conv_prepare, conv_squared_norms


def weights_and_biases(layers: Sequence[nn.Linear | nn.Conv2d]) -> list[torch.Tensor]:
    """Each layer's weight then bias, in order (every layer of the trained models has a bias; torch
    types a conv's bias ``Optional``: a missing one is refused)."""
    params: list[torch.Tensor] = []
    for layer in layers:
        params += [layer.weight, layer_bias(layer)]
    return params


def layer_bias(layer: nn.Linear | nn.Conv2d) -> torch.Tensor:
    """``layer.bias``, refused when the layer was built without one."""
    if layer.bias is None:
        raise ValueError(f"a {type(layer).__name__} layer without a bias: the trained models give every layer one")
    return layer.bias


def linear_squared_norms(g: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """``||g_i a_i^T||_F^2 + ||g_i||^2`` per example (weight and bias of a linear layer)."""
    return g.pow(2).sum(1) * (a.pow(2).sum(1) + 1)


def linear_clipped_sum(g: torch.Tensor, a: torch.Tensor, scale: torch.Tensor) -> list[torch.Tensor]:
    """A linear layer's clipped weight and bias sums, ``(c * G)^T A`` and ``sum_i c_i g_i``, flat."""
    weighted = g * scale[:, None]
    return [(weighted.T @ a).flatten(), weighted.sum(0)]


def linear_clipped_sum_into(
    g: torch.Tensor, a: torch.Tensor, scale: torch.Tensor, out: torch.Tensor, offset: int
) -> int:
    """:func:`linear_clipped_sum` written into ``out`` from ``offset`` (weight, then bias), so the
    flat update needs no concatenation; returns the offset after them."""
    return linear_update_into(g * scale[:, None], a, out, offset)


def linear_update_into(g: torch.Tensor, a: torch.Tensor, out: torch.Tensor, offset: int, alpha: float = 1.0) -> int:
    """A linear layer's batch update ``alpha g^T a`` (weight) and ``alpha sum_i g_i`` (bias) written into
    ``out`` from ``offset`` (``alpha`` inside the matrix product: no pass of its own); returns the offset
    after them."""
    rows, cols = g.shape[1], a.shape[1]
    weight = out[offset : offset + rows * cols].view(rows, cols)
    if alpha == 1.0:
        torch.mm(g.T, a, out=weight)
    else:
        torch.addmm(weight, g.T, a, beta=0, alpha=alpha, out=weight)  # beta 0: the empty memory is not read
    bias = torch.sum(g, 0, out=out[offset + rows * cols : offset + rows * cols + rows])
    if alpha != 1.0:
        bias.mul_(alpha)
    return offset + rows * cols + rows


def conv_norms_and_sums(
    conv: nn.Conv2d, h: torch.Tensor, g: torch.Tensor
) -> tuple[torch.Tensor, Callable[[torch.Tensor], list[torch.Tensor]]]:
    """A conv layer's per-example squared gradient norms (weight and bias) from its input ``h`` and output
    gradient ``g``, and the function giving its clipped weight and bias sums, flat, for per-example factors
    ``scale`` (:mod:`trainers.core.conv_per_example`: per-example gradients formed once and kept where they
    fit, so the clipped sum is a weighted sum of them, "book-keeping")."""
    recorded = conv_prepare(conv, h.detach(), g)
    norms = conv_squared_norms(conv, recorded)

    def clipped_sums(scale: torch.Tensor) -> list[torch.Tensor]:
        sums = conv_clipped_sums(conv, recorded, scale)
        return [sums["weight"].flatten(), sums["bias"]]

    return norms["weight"] + norms["bias"], clipped_sums


def clip_scale(squared_norms: torch.Tensor, bound: float) -> torch.Tensor:
    """Per-example factor ``min(1, bound / ||grad_i||)``."""
    return torch.clamp(bound / squared_norms.sqrt().clamp_min(1e-12), max=1.0)
