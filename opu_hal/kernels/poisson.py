"""Exact Poisson sampling in eager torch on any device, from a seeded ``torch.Generator``.

The simulated camera draws with it on a GPU without Triton; on the CPU it uses the compiled passes
of :mod:`opu_hal.kernels.compiled.poisson`, and on a GPU with Triton the fused kernel of
:mod:`opu_hal.kernels.triton_camera`, both the same algorithms on Philox counters. (``torch.poisson`` is
exact on the CPU but slow, about 45 ns a draw on the 2-core machine, and what it does on CUDA is
cuRAND's business.) This sampler is the same algorithm on every device:

- ``lambda >= 10``: Hoermann's transformed rejection with squeeze, PTRS (W. Hoermann, "The
  transformed rejection method for generating Poisson random variables", Insurance: Mathematics and
  Economics 12, 1993), as numpy's legacy ``random_poisson_ptrs``; the acceptance test is exact
  (``log V + log(1 / alpha) - log(a / u^2 + b) <= k log(lambda) - lambda - log k!``) and is evaluated
  in float64. About 1.1 rounds of two uniforms per draw.
- ``lambda < 10``: inversion by sequential search (``P(k) = P(k - 1) lambda / k``), in float64.

Every entry is a draw from Poisson(lambda) exactly, up to float64 rounding of the acceptance test.
"""

from __future__ import annotations

import math

import torch

PTRS_MIN_RATE = 10.0
TABLE_HALF_WIDTH_SD = 13.0  # the table spans the mean +- 13 sd (+ 20): tails below 1e-36


def poisson(rates: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Independent Poisson draws with means ``rates`` (any shape, ``>= 0``), in ``rates``' dtype."""
    flat = rates.detach().reshape(-1).double()
    if flat.numel() and bool((flat < 0).any() | ~torch.isfinite(flat).all()):
        raise ValueError("Poisson rates must be finite and >= 0")
    out = torch.zeros_like(flat)
    large = flat >= PTRS_MIN_RATE
    if bool(large.any()):
        index = large.nonzero().squeeze(1)
        out[index] = _ptrs(flat[index], generator)
    small = (~large) & (flat > 0)
    if bool(small.any()):
        index = small.nonzero().squeeze(1)
        out[index] = _inversion(flat[index], generator)
    return out.reshape(rates.shape).to(rates.dtype)


def _uniform(n: int, like: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    return torch.rand(n, dtype=torch.float64, device=like.device, generator=generator)


def _ptrs(lam: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """PTRS for rates ``>= 10`` (float64, 1-D)."""
    slam, loglam = lam.sqrt(), lam.log()
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    log_inv_alpha = torch.log(1.1239 + 1.1328 / (b - 3.4))
    vr = 0.9277 - 3.6224 / (b - 2)
    out = torch.empty_like(lam)
    pending = torch.arange(lam.numel(), device=lam.device)
    while pending.numel():
        u = _uniform(pending.numel(), lam, generator) - 0.5
        v = _uniform(pending.numel(), lam, generator)
        us = 0.5 - u.abs()
        a_p, b_p, lam_p = a[pending], b[pending], lam[pending]
        k = torch.floor((2 * a_p / us + b_p) * u + lam_p + 0.43)
        squeeze = (us >= 0.07) & (v <= vr[pending])
        possible = (k >= 0) & ~((us < 0.013) & (v > us))
        log_target = -lam_p + k * loglam[pending] - torch.lgamma(k.clamp(min=0) + 1)
        exact = v.log() + log_inv_alpha[pending] - torch.log(a_p / (us * us) + b_p) <= log_target
        accept = squeeze | (possible & exact)
        out[pending[accept]] = k[accept]
        pending = pending[~accept]
    return out


def _inversion(lam: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Inversion by sequential search for rates ``< 10`` (float64, 1-D)."""
    u = _uniform(lam.numel(), lam, generator)
    k = torch.zeros_like(lam)
    p = torch.exp(-lam)
    cumulative = p.clone()
    pending = torch.arange(lam.numel(), device=lam.device)
    while True:
        more = u[pending] > cumulative[pending]
        # float64 tail: a cumulative that stops growing (u within rounding of 1) ends the search
        pending = pending[more]
        if not pending.numel():
            return k
        k[pending] += 1
        p[pending] *= lam[pending] / k[pending]
        grown = cumulative[pending] + p[pending]
        stuck = grown <= cumulative[pending]
        cumulative[pending] = grown
        pending = pending[~stuck]


def poisson_constant(
    rate: float, n: int, generator: torch.Generator | None = None, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """``n`` Poisson(``rate``) draws (float32) by inversion from one CDF table
    (:func:`poisson_quantile` of float64 uniforms)."""
    if not (math.isfinite(rate) and rate >= 0):
        raise ValueError("Poisson rates must be finite and >= 0")
    if rate == 0:
        return torch.zeros(n, device=device)
    return poisson_quantile(rate, torch.rand(n, dtype=torch.float64, device=device, generator=generator))


def quantile_table(rate: float, device: torch.device | str = "cpu") -> tuple[int, torch.Tensor, torch.Tensor]:
    """``(low, cdf, guide)`` for inversion of Poisson(``rate``), ``rate > 0`` (Chen and Asau 1974):
    ``cdf[i] = F(low + i)`` over ``rate +- 13 sd`` (+ 20), float64, the omitted upper tail (< 1e-36,
    below float64's resolution of a uniform) joined to the last entry; ``guide[i]`` is the least
    index with ``F >= i / bins``, ``bins = 4 len(cdf)``, so the answer for ``u`` in
    ``[i / bins, (i + 1) / bins)`` lies at or after it."""
    spread = TABLE_HALF_WIDTH_SD * math.sqrt(rate) + 20
    low, high = max(0, math.floor(rate - spread)), math.ceil(rate + spread)
    k = torch.arange(low, high + 1, dtype=torch.float64, device=device)
    cdf = torch.cumsum(torch.exp(k * math.log(rate) - rate - torch.lgamma(k + 1)), dim=0)
    cdf[-1] = 1.0
    bins = 4 * k.numel()
    guide = torch.searchsorted(cdf, torch.arange(bins, dtype=torch.float64, device=device) / bins)
    return low, cdf, guide


def poisson_quantile(rate: float, u: torch.Tensor) -> torch.Tensor:
    """The least ``k`` with ``u <= F(k)`` for each float64 ``u`` in [0, 1), found through the guide
    table of :func:`quantile_table`; inversion is exact up to float64 rounding."""
    low, cdf, guide = quantile_table(rate, u.device)
    index = guide[(u * guide.numel()).long()]
    index += cdf[index] < u  # one step finishes almost every draw
    rest = (cdf[index] < u).nonzero().squeeze(1)  # the tail bins: a binary search for the few left
    if rest.numel():
        index[rest] = torch.searchsorted(cdf, u[rest])
    return (index + low).to(torch.float32)
