"""``nn.Embedding``: example ``i``'s weight gradient adds each position's output gradient ``g_t``
to the row of its index ``t`` (none to ``padding_idx``). Its squared norm is the sum over the
distinct indices of example ``i`` of ``||sum_{t: idx_t = v} g_t||^2``: rows are summed per
(example, index) pair with one ``index_add`` (``n T D`` operations; no ``(V, D)`` matrix per
example). The clipped sum adds ``c_i g_t`` into the rows with one more ``index_add``.
"""

from __future__ import annotations

import torch
from torch import nn

from ...core.formed import row_squares


def embedding_prepare(layer: nn.Embedding, a: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices ``(n, T)`` and output gradients ``(n, T, D)``, zero at ``padding_idx``."""
    n = a.shape[0]
    idx, g3 = a.reshape(n, -1), g.reshape(n, -1, layer.embedding_dim)
    if layer.padding_idx is not None:
        g3 = g3 * (idx != layer.padding_idx).unsqueeze(2).to(g3.dtype)
    return idx, g3


def embedding_squared_norms(layer: nn.Embedding, r: tuple[torch.Tensor, torch.Tensor]) -> dict[str, torch.Tensor]:
    idx, g3 = r
    n, positions = idx.shape
    example = torch.arange(n, device=idx.device).repeat_interleave(positions)
    keys = example * layer.num_embeddings + idx.flatten()
    unique, inverse = torch.unique(keys, return_inverse=True)
    rows = g3.new_zeros(unique.shape[0], layer.embedding_dim).index_add_(0, inverse, g3.reshape(-1, g3.shape[2]))
    owner = torch.div(unique, layer.num_embeddings, rounding_mode="floor")
    return {"weight": g3.new_zeros(n).index_add_(0, owner, row_squares(rows))}


def embedding_clipped_sums(
    layer: nn.Embedding, r: tuple[torch.Tensor, torch.Tensor], scale: torch.Tensor
) -> dict[str, torch.Tensor]:
    idx, g3 = r
    weighted = (g3 * scale[:, None, None]).reshape(-1, layer.embedding_dim)
    return {"weight": torch.zeros_like(layer.weight, dtype=g3.dtype).index_add_(0, idx.flatten(), weighted)}
