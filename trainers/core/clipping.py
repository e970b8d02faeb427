"""Clipping operators of the private methods, per example (rows of a batch)."""

from __future__ import annotations

import torch


def clip_norm(v: torch.Tensor, bound: float) -> torch.Tensor:
    """``min(bound, ||v||) v / ||v||`` per row (paper 002, section 4; paper 000 ``scale_s``)."""
    norms = v.norm(dim=1, keepdim=True)
    return v * torch.clamp(bound / norms.clamp_min(1e-12), max=1.0)


def clip_values(v: torch.Tensor, bound: float) -> torch.Tensor:
    """``sign(v_k) min(bound, |v_k|)`` element-wise (paper 000, ``clip_c``)."""
    return v.clamp(-bound, bound)


def offset(v: torch.Tensor, shift: float) -> torch.Tensor:
    """``v_k + shift`` element-wise (paper 000, ``offset_nu``)."""
    return v + shift
