"""``nn.Conv1d`` / ``nn.Conv2d`` (any kernel, stride, dilation, groups, padding and padding mode):
with ``U_i`` example ``i``'s input patches unfolded as the convolution reads them, ``(K, P)`` per
group, and ``G_i`` its output gradients ``(C_out / groups, P)``, the weight gradient is ``G_i U_i^T``.

The per-example gradients are formed by one batched product and kept (:mod:`.formed`); when too
large, the squared norm is ``<G_i^T G_i, U_i^T U_i>`` (ghost norm, ``P^2 (C_out + K)`` operations) or
``||G_i U_i^T||_F^2`` formed in chunks of :data:`CHUNK` examples (``C_out K P``), whichever is
cheaper, and the clipped sum is one product over all examples and positions.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .formed import fits, row_squares

CHUNK = 128  # examples per batched product (bounds the memory of formed gradients or Gram matrices)

Conv = nn.Conv1d | nn.Conv2d


def _pairs(conv: Conv) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Kernel, stride and dilation as 2-d tuples (a Conv1d is a Conv2d of height 1)."""
    lead = (1,) if isinstance(conv, nn.Conv1d) else ()
    return (*lead, *conv.kernel_size), (*lead, *conv.stride), (*lead, *conv.dilation)


def padded_input(conv: Conv, x: torch.Tensor) -> torch.Tensor:
    """``x`` padded exactly as the convolution pads it (zeros, ``'same'`` or another padding mode)."""
    if conv.padding_mode != "zeros":
        return F.pad(x, conv._reversed_padding_repeated_twice, mode=conv.padding_mode)
    if conv.padding == "valid":
        return x
    if conv.padding == "same":  # torch pads the odd remainder at the end
        pads: list[int] = []
        for k, d in zip(reversed(conv.kernel_size), reversed(conv.dilation)):
            total = d * (k - 1)
            pads += [total // 2, total - total // 2]
        return F.pad(x, pads)
    padding: tuple[int, ...] = conv.padding if isinstance(conv.padding, tuple) else (int(conv.padding),)
    pads = [p for size in reversed(padding) for p in (size, size)]
    return F.pad(x, pads)


def patches(conv: Conv, x: torch.Tensor) -> torch.Tensor:
    """The input patches ``(n, groups, P, K)``, ``K = prod(kernel) * C_in / groups`` ordered
    ``(kh, kw, channel)`` (:func:`in_weight_order` turns that order into the weight's). Windows are
    strided views of the padded input in channels-last order, copied once by the final reshape in
    contiguous runs of channels (``F.unfold``'s im2col was about 10x slower here on CPU)."""
    kernel, stride, dilation = _pairs(conv)
    x = padded_input(conv, x)
    x = (x.unsqueeze(2) if isinstance(conv, nn.Conv1d) else x).permute(0, 2, 3, 1).contiguous()  # (n, H, W, C)
    for dim, (k, s, d) in enumerate(zip(kernel, stride, dilation)):
        x = x.unfold(1 + dim, d * (k - 1) + 1, s)  # the window is appended as the last dimension
        x = x[..., ::d] if d > 1 else x
    n, rows, cols, channels = x.shape[:4]  # (n, H_out, W_out, C, kh, kw)
    windows = x.permute(0, 1, 2, 4, 5, 3).reshape(n, rows * cols, -1, conv.groups, channels // conv.groups)
    return windows.permute(0, 3, 1, 2, 4).reshape(n, conv.groups, rows * cols, -1)  # one copy


def in_weight_order(conv: Conv, t: torch.Tensor) -> torch.Tensor:
    """A ``(groups, C_out / groups, K)`` sum in :func:`patches`' order as the weight's shape."""
    kernel = _pairs(conv)[0]
    per_group = conv.in_channels // conv.groups
    return t.reshape(conv.out_channels, *kernel, per_group).movedim(-1, 1).reshape(conv.weight.shape)


def grouped_output(conv: Conv, g: torch.Tensor) -> torch.Tensor:
    """The output gradient ``(n, C_out, *spatial)`` as ``(n, groups, C_out / groups, P)``."""
    return g.reshape(g.shape[0], conv.groups, conv.out_channels // conv.groups, -1)


def conv_ghost_norms(g: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """``sum_groups <G^T G, U U^T>`` per example (``g``: ``(n, groups, O, P)``, ``u``: ``(n, groups, P, K)``)."""
    return (torch.matmul(g.transpose(2, 3), g) * torch.matmul(u, u.transpose(2, 3))).sum((1, 2, 3))


def conv_formed_norms(g: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """``||G U^T||_F^2`` per example, the per-example gradient formed by one batched product."""
    return row_squares(torch.matmul(g, u))


class Recorded(NamedTuple):
    u: torch.Tensor  # (n, groups, P, K) patches
    g: torch.Tensor  # (n, groups, O, P) output gradients
    formed: torch.Tensor | None  # (n, groups, O, K) per-example weight gradients, if kept


def conv_prepare(conv: Conv, a: torch.Tensor, g: torch.Tensor) -> Recorded:
    u, grouped = patches(conv, a), grouped_output(conv, g)
    keep = fits(grouped, *grouped.shape[:3], u.shape[3])
    return Recorded(u, grouped, torch.matmul(grouped, u) if keep else None)


def conv_squared_norms(conv: Conv, r: Recorded) -> dict[str, torch.Tensor]:
    bias = row_squares(r.g.sum(3))
    if r.formed is not None:
        return {"weight": row_squares(r.formed), "bias": bias}
    outputs, p, k = r.g.shape[2], r.u.shape[2], r.u.shape[3]
    norms = conv_ghost_norms if p * (outputs + k) < outputs * k else conv_formed_norms
    chunks = [norms(r.g[s : s + CHUNK], r.u[s : s + CHUNK]) for s in range(0, r.u.shape[0], CHUNK)]
    return {"weight": torch.cat(chunks) if chunks else r.u.new_zeros(0), "bias": bias}


def conv_clipped_sums(conv: Conv, r: Recorded, scale: torch.Tensor) -> dict[str, torch.Tensor]:
    bias = torch.tensordot(scale, r.g.sum(3), dims=1).flatten()
    if r.formed is not None:
        weight = torch.tensordot(scale, r.formed, dims=1)
    else:
        weight = torch.einsum("ngop,ngpk->gok", r.g * scale[:, None, None, None], r.u)
    return {"weight": in_weight_order(conv, weight), "bias": bias}
