"""``nn.Linear`` on inputs ``(n, ..., d_in)``: example ``i``'s weight gradient is ``G_i^T A_i``
(``G_i``: ``(T, d_out)`` output gradients, ``A_i``: ``(T, d_in)`` inputs, ``T`` positions).

With ``T = 1`` its squared norm is ``||g_i||^2 ||a_i||^2`` and the clipped sum one product
``(c G)^T A`` (ghost clipping). With ``T > 1`` the per-example gradients are formed by one batched
product and kept (:mod:`trainers.core.formed`), or, when too large, the norm is ``<G_i G_i^T, A_i A_i^T>``
(ghost norm, ``T^2 (d_in + d_out)`` operations) or the formed gradient's, whichever is cheaper.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from ...core.formed import fits, row_squares


class Recorded(NamedTuple):
    a: torch.Tensor  # (n, T, d_in)
    g: torch.Tensor  # (n, T, d_out)
    formed: torch.Tensor | None  # (n, d_out, d_in) per-example weight gradients, if kept


def ghost_squared_norms(g: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """``<G_i G_i^T, A_i A_i^T>`` per example (``g``: ``(n, T, o)``, ``a``: ``(n, T, k)``)."""
    return (torch.bmm(g, g.transpose(1, 2)) * torch.bmm(a, a.transpose(1, 2))).sum((1, 2))


def formed_squared_norms(g: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """``||G_i^T A_i||_F^2`` per example, the per-example gradient formed by one batched product."""
    return row_squares(torch.bmm(g.transpose(1, 2), a))


def linear_prepare(layer: nn.Linear, a: torch.Tensor, g: torch.Tensor) -> Recorded:
    n = a.shape[0]
    a3, g3 = a.reshape(n, -1, a.shape[-1]), g.reshape(n, -1, g.shape[-1])
    keep = a3.shape[1] > 1 and fits(g3, n, g3.shape[2], a3.shape[2])
    return Recorded(a3, g3, torch.bmm(g3.transpose(1, 2), a3) if keep else None)


def linear_squared_norms(layer: nn.Linear, r: Recorded) -> dict[str, torch.Tensor]:
    positions, d_in, d_out = r.a.shape[1], r.a.shape[2], r.g.shape[2]
    if r.formed is not None:
        weight = row_squares(r.formed)
    elif positions == 1:
        weight = row_squares(r.g[:, 0]) * row_squares(r.a[:, 0])
    elif positions * (d_in + d_out) < d_in * d_out:
        weight = ghost_squared_norms(r.g, r.a)
    else:
        weight = formed_squared_norms(r.g, r.a)
    return {"weight": weight, "bias": row_squares(r.g.sum(1))}


def linear_clipped_sums(layer: nn.Linear, r: Recorded, scale: torch.Tensor) -> dict[str, torch.Tensor]:
    weighted = r.g * scale[:, None, None]
    bias = weighted.sum((0, 1))
    if r.formed is not None:
        return {"weight": torch.tensordot(scale, r.formed, dims=1), "bias": bias}
    flat = weighted.reshape(-1, r.g.shape[2])
    return {"weight": flat.T @ r.a.reshape(-1, r.a.shape[2]), "bias": bias}
