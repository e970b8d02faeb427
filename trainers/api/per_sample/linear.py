"""``nn.Linear`` on inputs ``(n, ..., d_in)``: example ``i``'s weight gradient is ``G_i^T A_i``
(``G_i``: ``(T, d_out)`` output gradients, ``A_i``: ``(T, d_in)`` inputs, ``T`` positions).

Its squared norm is ``<G_i G_i^T, A_i A_i^T>`` (ghost norm, ``T^2 (d_in + d_out)`` operations) or
``||G_i^T A_i||_F^2`` formed (``T d_in d_out``), whichever is cheaper; with ``T = 1`` it is
``||g_i||^2 ||a_i||^2``. The clipped sum is one product ``(c G)^T A`` over all positions.
"""

from __future__ import annotations

import torch
from torch import nn


def as_sequences(a: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``a`` and ``g`` as ``(n, T, d_in)`` and ``(n, T, d_out)``."""
    n = a.shape[0]
    return a.reshape(n, -1, a.shape[-1]), g.reshape(n, -1, g.shape[-1])


def ghost_squared_norms(g: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """``<G_i G_i^T, A_i A_i^T>`` per example (``g``: ``(n, T, o)``, ``a``: ``(n, T, k)``)."""
    return (torch.bmm(g, g.transpose(1, 2)) * torch.bmm(a, a.transpose(1, 2))).sum((1, 2))


def formed_squared_norms(g: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """``||G_i^T A_i||_F^2`` per example, the per-example gradient formed by one batched product."""
    return torch.bmm(g.transpose(1, 2), a).flatten(1).pow(2).sum(1)


def linear_squared_norms(layer: nn.Linear, a: torch.Tensor, g: torch.Tensor) -> dict[str, torch.Tensor]:
    a3, g3 = as_sequences(a, g)
    positions, d_in, d_out = a3.shape[1], a3.shape[2], g3.shape[2]
    if positions == 1:
        weight = g3[:, 0].pow(2).sum(1) * a3[:, 0].pow(2).sum(1)
    elif positions * (d_in + d_out) < d_in * d_out:
        weight = ghost_squared_norms(g3, a3)
    else:
        weight = formed_squared_norms(g3, a3)
    return {"weight": weight, "bias": g3.sum(1).pow(2).sum(1)}


def linear_clipped_sums(
    layer: nn.Linear, a: torch.Tensor, g: torch.Tensor, scale: torch.Tensor
) -> dict[str, torch.Tensor]:
    a3, g3 = as_sequences(a, g)
    weighted = (g3 * scale[:, None, None]).reshape(-1, g3.shape[2])
    return {"weight": weighted.T @ a3.reshape(-1, a3.shape[2]), "bias": weighted.sum(0)}
