"""RDP of the Gaussian on a fixed-size batch drawn without replacement (replace-one adjacency), the bound
of Wang, Balle, Kasiviswanathan 2019 (Theorem 27 of arXiv 1808.00087) exactly as Google's ``dp_accounting``
computes it (``rdp_privacy_accountant._compute_rdp_sample_wor_gaussian``), vectorised with numpy.

The library runs the bound in Python loops, ``O(alpha^2)`` log-space operations per integer order up to 256
and again for both neighbours of each fractional order (0.7 s a curve on the default orders). Here the
forward differences of ``exp(cgf)`` (the same log-magnitude and sign recursion, one numpy step per
difference order) are computed once per noise multiplier and shared by every order, and the sum over
``j`` is one ``logaddexp`` reduction per order, in the library's order of terms. The result is raised by
:data:`ROUND_UP` (relative) so it is never below the library's; ``tests/test_fixed_size_gaussian.py``
checks both over a grid of sampling rates, multipliers and orders.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln

#: Orders up to this use the exact forward-difference bound; above it the library's cheaper one (``2 e^cgf``).
EXACT_MAX_ORDER = 256
#: Relative amount every finite value is raised by, above the float rounding between two summation orders.
ROUND_UP = 1e-12

_LOG2, _LOG4 = math.log(2.0), math.log(4.0)


# The library mixes ``math`` and numpy scalar functions, which differ in the last bit now and then; high
# forward differences cancel, so those bits matter. Each call below uses the function the library uses there
# (numpy's vector functions equal its scalar ones bit for bit).
_MATH_EXP = np.frompyfunc(math.exp, 1, 1)
_MATH_LOG1P = np.frompyfunc(math.log1p, 1, 1)


def _math(function: np.ufunc, x: np.ndarray) -> np.ndarray:
    """``function`` (one of the ``math`` wrappers above) elementwise, as float64."""
    return np.asarray(function(x), dtype=np.float64)


def _log_sub_sign(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``log|e^x - e^y|`` and whether ``e^x >= e^y`` (the library's ``_log_sub_sign``, elementwise)."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        above = x > y
        big, small = np.where(above, x, y), np.where(above, y, x)
        gap = -np.exp(np.where(x == y, -np.inf, small - big))
        tail = np.where(above, _math(_MATH_LOG1P, gap), np.log1p(gap))
        magnitude = np.where(x == y, -np.inf, big + tail)
    return x >= y, magnitude


def _log_add(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``log(e^x + e^y)`` (the library's ``_log_add``, elementwise)."""
    small, big = np.minimum(x, y), np.maximum(x, y)
    finite = small != -np.inf
    out: np.ndarray = big.copy()
    out[finite] = _math(_MATH_LOG1P, _math(_MATH_EXP, small[finite] - big[finite])) + big[finite]
    return out


def log_forward_differences(sigma: float, count: int) -> np.ndarray:
    """``deltas[i] = log|Delta^(i+1) f(-1)|`` for ``f(x) = exp(x (x + 1) / (2 sigma^2))``, ``i < count + 2``: the
    library's ``_get_forward_diffs(cgf, count)``, one vector step per difference order (Theorem 27's
    ``Delta^j``; the signs are not used by the bound)."""
    x = np.arange(-1.0, count + 2.0)
    values = x * (x + 1) / (2.0 * sigma**2)
    values[0] = 0.0
    signs = np.ones_like(values, dtype=bool)
    deltas = np.empty(count + 2)
    for i in range(count + 2):
        low, high, s_low, s_high = values[:-1], values[1:], signs[:-1], signs[1:]
        same_sign, magnitude = _log_sub_sign(high, low)
        same = s_low == s_high
        values = np.where(same, magnitude, _log_add(low, high))
        signs = np.where(same, np.where(s_high, same_sign, ~same_sign), s_high)
        deltas[i] = values[0]
    return deltas


def _log_comb(n: np.ndarray, k: np.ndarray) -> np.ndarray:
    out: np.ndarray = gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)
    return out


def _log_a_integer(q: float, sigma: float, alphas: np.ndarray) -> np.ndarray:
    """``log A_alpha`` of Theorem 27 at integer orders ``alphas >= 1`` (0 at order 1)."""
    out = np.zeros(len(alphas))
    if not len(alphas) or alphas.max() < 2:
        return out
    func2 = 2.0 / (2.0 * sigma**2)
    second_factor = min(_LOG4 + (func2 + math.log1p(-math.exp(-func2))), func2 + _LOG2)
    top = int(alphas.max())
    j = np.arange(2, top + 1, dtype=np.float64)
    cgf = (j - 1) * j / (2.0 * sigma**2)  # cgf(j - 1)
    exact_top = min(top, EXACT_MAX_ORDER)
    deltas = log_forward_differences(sigma, exact_top) if exact_top >= 3 else np.zeros(0)
    capped = _LOG2 + cgf
    if len(deltas):
        jj = j[: exact_top - 1].astype(np.int64)
        moment = _LOG4 + 0.5 * (deltas[2 * (jj // 2) - 1] + deltas[2 * ((jj + 1) // 2) - 1])
        exact = capped.copy()
        exact[: exact_top - 1] = np.minimum(moment, capped[: exact_top - 1])
    else:
        exact = capped
    for index, alpha in enumerate(alphas):
        a = int(alpha)
        if a < 2:
            continue
        factor = exact if a <= EXACT_MAX_ORDER else capped
        terms = j[: a - 1] * math.log(q) + _log_comb(np.float64(a), j[: a - 1]) + factor[: a - 1]
        terms[0] = 2 * math.log(q) + float(_log_comb(np.float64(a), np.float64(2.0))) + second_factor
        out[index] = np.logaddexp.reduce(np.concatenate(([0.0], terms)))
    return out


def fixed_size_gaussian_rdp(sampling_rate: float, noise_multiplier: float, orders: np.ndarray) -> np.ndarray:
    """RDP at each order of the Gaussian with multiplier ``noise_multiplier`` on a batch of ``sampling_rate`` times the
    dataset drawn without replacement, replace-one adjacency (WBK 2019, Theorem 27; fractional orders by their
    Corollary 10, the CGF interpolated between the two neighbouring integers), as ``dp_accounting`` computes it,
    raised by :data:`ROUND_UP`."""
    orders = np.asarray(orders, dtype=np.float64)
    q, sigma = float(sampling_rate), float(noise_multiplier)
    if not (0 < q <= 1) or not (sigma > 0) or (orders < 1).any() or np.isnan(orders).any():
        raise ValueError(f"need 0 < sampling_rate <= 1, noise_multiplier > 0, orders >= 1; got {q}, {sigma}, {orders}")
    if q == 1.0:
        return orders / (2 * sigma**2)
    finite = np.isfinite(orders)
    low, high = np.floor(orders[finite]), np.ceil(orders[finite])
    integers = np.unique(np.concatenate((low, high)))
    log_a = dict(zip(integers.tolist(), _log_a_integer(q, sigma, integers).tolist(), strict=True))
    t = orders[finite] - low
    x = np.array([log_a[v] for v in low.tolist()])
    y = np.array([log_a[v] for v in high.tolist()])
    out = np.full(len(orders), np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.where(t == 0, x, (1 - t) * x + t * y) / (orders[finite] - 1)
    value = np.where(orders[finite] == 1, 0.0, value)
    out[finite] = value * (1 + ROUND_UP)
    return out
