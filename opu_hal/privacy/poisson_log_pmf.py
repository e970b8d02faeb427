"""``log Pois(x; lambda)`` without cancellation: Loader's saddle-point form, as R's ``dpois`` computes it.

The direct form ``x log(lambda) - lambda - log(x!)`` subtracts numbers near ``x log(lambda)`` (2.3e4 at
``lambda = 2858``, 2.0e5 at 2e4) to leave a few units: its absolute error, a few ulps of the largest
term (3.6e-12 at 2.3e4), is the relative error of the probability, ten times what a digitized law's
error budget allows. Loader (2000, "Fast and accurate computation of binomial probabilities") writes

    log Pois(x; lambda) = -stirlerr(x) - bd0(x, lambda) - log(2 pi x) / 2,     x >= 1,          (L1)

with ``stirlerr(n) = log(n!) - log(sqrt(2 pi n) (n / e)^n)`` (Stirling's series, or ``gammaln`` minus
its leading terms for ``n <= 15``, where they are small) and the deviance ``bd0(x, m) = x log(x / m) + m
- x >= 0``, summed as its series ``(x - m) v + 2 x sum_j v^(2j+1) / (2j + 1)``, ``v = (x - m) / (x + m)``,
where ``|x - m| < (x + m) / 10`` (the direct form cancels there). Every term of (L1) is then at most
``|log Pois| + log(2 pi x)`` in size, so the absolute error is a few ulps of the *result*.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln

_SERIES_TERMS = 14  # v^2 <= 1 / 121 where the series is used: 14 terms reach below 1e-28 relative
_STIRLING = (1 / 12, 1 / 360, 1 / 1260, 1 / 1680, 1 / 1188)


def stirlerr(n: np.ndarray) -> np.ndarray:
    """``log(n!) - (n + 1/2) log(n) + n - log(2 pi) / 2`` for ``n >= 1`` (Stirling's series above 15)."""
    n = np.asarray(n, dtype=np.float64)
    small = n <= 15
    out = np.empty(n.shape)
    ns = n[small]
    out[small] = gammaln(ns + 1) - (ns + 0.5) * np.log(ns) + ns - 0.5 * math.log(2 * math.pi)
    big = n[~small]
    inv2 = 1 / (big * big)
    s0, s1, s2, s3, s4 = _STIRLING
    out[~small] = (s0 - (s1 - (s2 - (s3 - s4 * inv2) * inv2) * inv2) * inv2) / big
    return out


def bd0(x: np.ndarray, mean: float) -> np.ndarray:
    """The deviance ``x log(x / mean) + mean - x`` (>= 0) without cancellation near ``x = mean``."""
    x = np.asarray(x, dtype=np.float64)
    out: np.ndarray = x * np.log(x / mean) + mean - x
    near = np.abs(x - mean) < 0.1 * (x + mean)
    if near.any():
        xn = x[near]
        v = (xn - mean) / (xn + mean)
        total = (xn - mean) * v
        term = 2 * xn * v
        v2 = v * v
        for j in range(1, _SERIES_TERMS + 1):
            term = term * v2
            total = total + term / (2 * j + 1)
        out[near] = total
    return out


def log_poisson_pmf(x: np.ndarray, mean: float) -> np.ndarray:
    """``log P(X = x)`` for ``X ~ Poisson(mean)`` at non-negative integers ``x`` (module docstring, (L1))."""
    x = np.asarray(x, dtype=np.float64)
    out = np.full(x.shape, -float(mean))  # x = 0
    positive = x > 0
    xp = x[positive]
    out[positive] = -stirlerr(xp) - bd0(xp, mean) - 0.5 * np.log(2 * math.pi * xp)
    return out
