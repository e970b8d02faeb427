"""Per-coordinate accounting of randomized rounding plus Skellam noise (issue 29).

The lattice mechanism of :mod:`.skellam` releases ``R(x) + K`` for ``x = gamma u``, with ``R`` the
unbiased randomized rounding of every coordinate and ``K_j`` independent Skellam(lambda, lambda)
counts. Its worst-case analysis charges every coordinate a full extra lattice step (sensitivity
``(k + 1) sqrt(d)``), which forces ``gamma Delta = k sqrt(d)`` and a Poisson mean growing with the
dimension (3.97e8 e- per count for the main job). This module accounts the same release exactly
per coordinate, so the Poisson mean no longer depends on ``d``.

**Theorem.** Let ``L_t`` be the law of ``R(t) + K`` for a real ``t`` (``R(t) = floor(t) +
Bernoulli(frac t)``, ``K ~ Sk(lambda)``) and, for integer ``alpha >= 2``,

    kappa_alpha(lambda) >= sup_{t, t' real, t != t'} D_alpha(L_t' || L_t) / (t' - t)^2.

Then for ``x, x'`` in ``R^d`` with ``||x - x'||_2 <= c`` the release satisfies
``D_alpha(M(x') || M(x)) <= c^2 kappa_alpha(lambda)``.

*Proof.* The coordinates of ``M(x)`` are independent (independent uniforms and counts), so the
Renyi divergence of the product laws is the sum of the coordinates' divergences, each at most
``kappa (x'_j - x_j)^2``; sum. Counts of larger means (``lambda_j >= lambda``) and independent read
noise are post-processing (:mod:`.skellam`, "What may count as noise"). []

**Computing kappa** (:func:`rounding_rdp_coefficient`), with ``P_k`` the Skellam law shifted by
``k``, ``delta = t' - t`` and, by shift invariance, ``t = f in [0, 1)``, so ``L_t = (1 - f) P_0 + f P_1``
lies pointwise between ``P_0`` and ``P_1``:

*Case |delta| <= 1.* The rounding is unbiased, so ``L_t' - L_t = delta (P_1 - P_0) + w D`` with
``|w| <= |delta|`` and ``D`` one of the second differences ``P_2 - 2 P_1 + P_0``,
``P_1 - 2 P_0 + P_{-1}`` (check the three cases: no crossing, ``w = 0``; crossing up,
``w = f + delta - 1``; crossing down, ``w = -f - delta``). With ``Y = L_t'/L_t - 1`` (mean 0):
``exp((alpha - 1) D_alpha) = E[(1 + Y)^alpha] <= 1 + C(alpha, 2) E[Y^2] + sum_{i>=3} C(alpha, i) E|Y|^i``.
Minkowski gives ``E[Y^2] <= delta^2 (sqrt(A) + sqrt(B))^2`` with ``A = chi^2(P_1 || P_0)`` and ``B``
the largest ``sum D^2 / P_e`` (``e = 0, 1``), because ``1 / L_t <= (1 - f)/P_0 + f/P_1`` (convexity);
the same convexity bounds ``E|Y|^i <= |delta|^i G_i``, ``G_i = max_e sum (|P_1 - P_0| + max|D|)^i / P_e^(i-1)``.
With ``|delta|^i <= delta^2``: ``D_alpha <= delta^2 W / (alpha - 1)``,
``W = C(alpha, 2)(sqrt(A) + sqrt(B))^2 + sum_{i=3}^{alpha} C(alpha, i) G_i``.

*Case |delta| > 1.* Couple ``R(t)``, ``R(t')`` through one uniform: they differ by ``s = floor|delta|``
or ``s + 1`` (probability ``theta = frac|delta|``). Joint convexity of ``exp((alpha - 1) D_alpha)``
gives ``D_alpha <= log((1 - theta) e^((alpha-1) E(s)) + theta e^((alpha-1) E(s+1))) / (alpha - 1)``
with ``E(s)`` Agarwal, Kairouz and Liu's bound (2021, Theorem 3.5) for an integer shift ``s``. Its
ratio to ``delta^2`` is maximized over a grid of ``theta`` with interval bounds (the numerator
grows with theta, the denominator too), for ``s <= S``; beyond, ``E(s + 1) / s^2`` decreases in ``s``.

For large ``lambda``, ``kappa_alpha ~ 1.125 alpha / (4 lambda)``: the Gaussian mechanism's
``alpha / (4 lambda)`` per unit squared sensitivity, times 1.125 from shifts just above one step.
Checked against exact divergences of the mixtures on a grid of ``(t, delta)`` in
``tests/test_rounding_accounting.py`` (never below them).

Orders above :data:`MAX_ORDER` get ``inf`` (the series has ``alpha`` terms; those orders are never
the optimum at the epsilons trained for).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy.special import gammaln, ive, logsumexp

from .events import Event, Neighboring, PrivacyParameterError, _positive, register_event
from .subsampling import check_fixed_batch, subsampled_without_replacement_rdp

MAX_ORDER = 64
MIN_POISSON_MEAN = 4.0
_SHIFT_SEARCH = 64  # integer shifts searched in the case |delta| > 1
_THETA_CELLS = 512  # theta sub-intervals per shift


def _skellam_logpmf(n: np.ndarray, poisson_mean: float) -> np.ndarray:
    """``log P(K = n)`` for ``K ~ Sk(lambda, lambda)``: ``log(ive(|n|, 2 lambda))``."""
    with np.errstate(divide="ignore"):
        log_pmf: np.ndarray = np.log(ive(np.abs(n), 2 * poisson_mean))
        return log_pmf


def _support(poisson_mean: float) -> np.ndarray:
    """Integers carrying every non-negligible term of the sums below (``exp(-745)`` is 0 in float64)."""
    std = math.sqrt(2 * poisson_mean)
    half = int(math.ceil(45 * std + 60 + 2 * MAX_ORDER))
    return np.arange(-half, half + 1, dtype=np.float64)


def _log_binomial(alpha: int, i: np.ndarray) -> np.ndarray:
    return gammaln(alpha + 1) - gammaln(i + 1) - gammaln(alpha - i + 1)


@functools.lru_cache(maxsize=64)
def _near_terms(poisson_mean: float) -> tuple[float, float, np.ndarray]:
    """``A``, ``B`` and ``log G_i`` (``i = 0..MAX_ORDER``) of the module docstring."""
    n = _support(poisson_mean)
    log_p = {k: _skellam_logpmf(n - k, poisson_mean) for k in (-1, 0, 1, 2)}
    a = b = 0.0
    log_g = np.full(MAX_ORDER + 1, -np.inf)
    i = np.arange(MAX_ORDER + 1, dtype=np.float64)
    for e in (0, 1):
        keep = np.isfinite(log_p[e])
        ratio = {k: np.exp(log_p[k][keep] - log_p[e][keep]) for k in (-1, 0, 1, 2)}
        weight = np.exp(log_p[e][keep])
        first = ratio[1] - ratio[0]
        second = np.maximum(np.abs(ratio[2] - 2 * ratio[1] + ratio[0]), np.abs(ratio[1] - 2 * ratio[0] + ratio[-1]))
        a = max(a, float(np.sum(weight * first**2)))
        b = max(b, float(np.sum(weight * second**2)))
        with np.errstate(divide="ignore"):
            log_h = np.log(np.abs(first) + second)
        terms = log_p[e][keep][None, :] + i[:, None] * log_h[None, :]
        log_g = np.maximum(log_g, logsumexp(terms, axis=1))
    return a, b, log_g


def _near_coefficient(alpha: int, poisson_mean: float) -> float:
    """``W / (alpha - 1)``: the bound for ``|delta| <= 1``."""
    a, b, log_g = _near_terms(poisson_mean)
    second = math.comb(alpha, 2) * (math.sqrt(a) + math.sqrt(b)) ** 2
    if alpha >= 3:
        i = np.arange(3, alpha + 1)
        higher = float(np.exp(logsumexp(_log_binomial(alpha, i) + log_g[i])))
    else:
        higher = 0.0
    return (second + higher) / (alpha - 1)


def integer_shift_rdp(alpha: float, shift: np.ndarray, poisson_mean: float) -> np.ndarray:
    """Agarwal-Kairouz-Liu (Theorem 3.5) for one coordinate shifted by the integer ``shift``."""
    s = np.asarray(shift, dtype=np.float64)
    lam = poisson_mean
    return alpha * s**2 / (4 * lam) + np.minimum(((2 * alpha - 1) * s**2 + 6 * s) / (16 * lam**2), 3 * s / (4 * lam))


def _far_coefficient(alpha: int, poisson_mean: float) -> float:
    """The bound for ``|delta| > 1`` (module docstring), with the grid's interval slack included."""
    shifts = np.arange(1, _SHIFT_SEARCH + 1, dtype=np.float64)[:, None]
    edges = np.linspace(0.0, 1.0, _THETA_CELLS + 1)[None, :]
    low, high = edges[:, :-1], edges[:, 1:]
    e_s = (alpha - 1) * integer_shift_rdp(alpha, shifts, poisson_mean)
    e_next = (alpha - 1) * integer_shift_rdp(alpha, shifts + 1, poisson_mean)
    with np.errstate(divide="ignore"):
        numerator = np.logaddexp(np.log1p(-high) + e_s, np.log(high) + e_next) / (alpha - 1)
    best = float(np.max(numerator / (shifts + low) ** 2))
    tail = float(integer_shift_rdp(alpha, np.array(_SHIFT_SEARCH + 1.0), poisson_mean)) / _SHIFT_SEARCH**2
    return max(best, tail)


@functools.lru_cache(maxsize=4096)
def _coefficient(alpha: int, poisson_mean: float) -> float:
    return max(_near_coefficient(alpha, poisson_mean), _far_coefficient(alpha, poisson_mean))


def rounding_rdp_coefficient(orders: np.ndarray, poisson_mean: float) -> np.ndarray:
    """``kappa_alpha(lambda)`` at each order: inf at non-integer orders and above :data:`MAX_ORDER`."""
    if not (math.isfinite(poisson_mean) and poisson_mean >= MIN_POISSON_MEAN):
        raise PrivacyParameterError(
            f"the per-coordinate rounding analysis needs a Poisson mean >= {MIN_POISSON_MEAN:g}, got {poisson_mean}"
        )
    orders = np.asarray(orders, dtype=np.float64)
    out = np.full(orders.shape, np.inf)
    for index, alpha in np.ndenumerate(orders):
        if alpha == math.floor(alpha) and 2 <= alpha <= MAX_ORDER:
            out[index] = _coefficient(int(alpha), float(poisson_mean))
    return out


def rounded_skellam_rdp(orders: np.ndarray, l2_sensitivity: float, poisson_mean: float) -> np.ndarray:
    """RDP of ``R(x) + K`` for inputs ``c = l2_sensitivity`` apart (lattice units): ``c^2 kappa``."""
    return l2_sensitivity**2 * rounding_rdp_coefficient(orders, poisson_mean)


@dataclass(frozen=True)
class RoundedSkellamEvent(Event):
    """One release ``R(gamma u) + K`` accounted per coordinate (module docstring), no subsampling;
    ``l2_sensitivity`` is ``gamma Delta`` under the accountant's relation (not rounded up)."""

    l2_sensitivity: float
    poisson_mean: float
    kind: ClassVar[str] = "rounded_skellam"
    relations: ClassVar[tuple[str, ...]] = ("add_remove", "replace_one")

    def __post_init__(self) -> None:
        _positive("l2_sensitivity", self.l2_sensitivity)
        _positive("poisson_mean", self.poisson_mean)

    def rdp(self, orders: np.ndarray, neighboring: Neighboring) -> np.ndarray:
        return rounded_skellam_rdp(orders, self.l2_sensitivity, self.poisson_mean)


@dataclass(frozen=True)
class FixedSizeRoundedSkellamEvent(Event):
    """:class:`RoundedSkellamEvent` on a fixed-size batch drawn without replacement (replace-one;
    Wang, Balle and Kasiviswanathan 2019, Theorem 9), as DP-DFA with device noise uses it."""

    dataset_size: int
    batch_size: int
    l2_sensitivity: float
    poisson_mean: float
    kind: ClassVar[str] = "fixed_size_rounded_skellam"
    relations: ClassVar[tuple[str, ...]] = ("replace_one",)

    def __post_init__(self) -> None:
        check_fixed_batch(self.dataset_size, self.batch_size)
        _positive("l2_sensitivity", self.l2_sensitivity)
        _positive("poisson_mean", self.poisson_mean)

    def rdp(self, orders: np.ndarray, neighboring: Neighboring) -> np.ndarray:
        def base(alphas: np.ndarray) -> np.ndarray:
            return rounded_skellam_rdp(alphas, self.l2_sensitivity, self.poisson_mean)

        return subsampled_without_replacement_rdp(base, self.batch_size / self.dataset_size, orders)


for _cls in (RoundedSkellamEvent, FixedSizeRoundedSkellamEvent):
    register_event(_cls)
