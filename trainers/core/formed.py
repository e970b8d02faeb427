"""When to form per-example gradients: forming ``G_i A_i^T`` for every example costs the same
operations as the clipped sum's one product, and the clipped sum is then a weighted sum of what was
formed; so a layer's per-example gradients are formed and kept unless they would take more than
:data:`FORMED_BYTES`, and only then are the norms taken by ghost norms (Gram matrices) or in chunks."""

from __future__ import annotations

import torch

FORMED_BYTES = 2**28  # per layer and step (256 MiB)


def fits(like: torch.Tensor, *shape: int) -> bool:
    """Whether a tensor of ``shape`` in ``like``'s dtype takes at most :data:`FORMED_BYTES`."""
    count = 1
    for size in shape:
        count *= size
    return count * like.element_size() <= FORMED_BYTES


def row_squares(x: torch.Tensor) -> torch.Tensor:
    """``||x_i||^2`` per example (first dimension), without a squared copy of ``x``."""
    flat = x.reshape(x.shape[0], -1)
    return torch.einsum("ni,ni->n", flat, flat)
