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
from scipy.special import gammaln, ive

from .events import Event, Neighboring, PrivacyParameterError, _positive, register_event
from .subsampling import (
    PoissonSampled,
    check_fixed_batch,
    subsampled_without_replacement_rdp,
)

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


def _log_binomial(alpha: int | np.ndarray, i: np.ndarray) -> np.ndarray:
    return gammaln(alpha + 1) - gammaln(i + 1) - gammaln(alpha - i + 1)


def logsumexp_rows(x: np.ndarray) -> np.ndarray:
    """``log(sum(exp(x)))`` of each row (``-inf`` for a row of ``-inf``); numpy only, for speed."""
    top = np.max(x, axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        out: np.ndarray = top[:, 0] + np.log(np.sum(np.exp(x - top), axis=1))
    return out


def _shifted_logpmfs(n: np.ndarray, poisson_mean: float) -> dict[int, np.ndarray]:
    """``log P_k(n) = log P(K = n - k)`` for ``k = -1, 0, 1, 2``: the same values as
    :func:`_skellam_logpmf` at each shift, from one table of the law at ``|n - k|`` (the pmf is even)."""
    distance = {k: np.abs(n - k).astype(np.int64) for k in (-1, 0, 1, 2)}
    table = _skellam_logpmf(np.arange(max(int(d.max()) for d in distance.values()) + 1, dtype=np.float64), poisson_mean)
    return {k: table[d] for k, d in distance.items()}


@functools.lru_cache(maxsize=64)
def _near_terms(poisson_mean: float) -> tuple[float, float, np.ndarray]:
    """``A``, ``B`` and ``log G_i`` (``i = 0..MAX_ORDER``) of the module docstring."""
    n = _support(poisson_mean)
    log_p = _shifted_logpmfs(n, poisson_mean)
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
        log_g = np.maximum(log_g, logsumexp_rows(terms))
    return a, b, log_g


def near_bound(alphas: np.ndarray, a: float, b: float, log_g: np.ndarray) -> np.ndarray:
    """``W / (alpha - 1)`` at each integer order of ``alphas`` (>= 2) from ``A``, ``B`` and ``log G_i``
    (``i = 0 .. MAX_ORDER``): the bound for ``|delta| <= 1`` of any integer noise law's terms."""
    second = alphas * (alphas - 1) / 2 * (math.sqrt(a) + math.sqrt(b)) ** 2
    i = np.arange(3, MAX_ORDER + 1, dtype=np.float64)[None, :]
    top = alphas[:, None].astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # a bound of inf is an answer
        terms = np.where(i <= top, _log_binomial(top, i) + log_g[3:][None, :], -np.inf)
        higher = np.where(alphas >= 3, np.exp(logsumexp_rows(terms)), 0.0)
    coefficients: np.ndarray = (second + higher) / (alphas - 1)
    return coefficients


def _near_coefficients(alphas: np.ndarray, poisson_mean: float) -> np.ndarray:
    """``W / (alpha - 1)`` at each integer order of ``alphas`` (>= 2): the bound for ``|delta| <= 1``."""
    return near_bound(alphas, *_near_terms(poisson_mean))


def integer_shift_rdp(alpha: float | np.ndarray, shift: np.ndarray, poisson_mean: float) -> np.ndarray:
    """Agarwal-Kairouz-Liu (Theorem 3.5) for one coordinate shifted by the integer ``shift``."""
    s = np.asarray(shift, dtype=np.float64)
    lam = poisson_mean
    return alpha * s**2 / (4 * lam) + np.minimum(((2 * alpha - 1) * s**2 + 6 * s) / (16 * lam**2), 3 * s / (4 * lam))


def _far_cells(alpha: float, e: np.ndarray, count: int) -> float:
    """The largest grid-cell bound over the shifts ``s = 1 .. count`` and the theta cells ``[low, high]``:
    ``log((1 - high) e^e(s) + high e^e(s+1)) / ((alpha - 1)(s + low)^2)`` with ``e(s) = (alpha - 1) E(s)``."""
    edges = np.linspace(0.0, 1.0, _THETA_CELLS + 1)
    low, high = edges[None, :-1], edges[None, 1:]
    s = np.arange(1, count + 1, dtype=np.float64)[:, None]
    e_s, e_next = e[:count, None], e[1 : count + 1, None]
    # e(s) <= e(s + 1): log((1 - h) e^a + h e^b) = b + log(h + (1 - h) e^(a - b)), which cannot overflow
    numerator = (e_next + np.log(high + (1 - high) * np.exp(e_s - e_next))) / (alpha - 1)
    return float(np.max(numerator / (s + low) ** 2))


def _far_coefficients(alphas: np.ndarray, poisson_mean: float) -> np.ndarray:
    """The bound for ``|delta| > 1`` (module docstring), with the grid's interval slack included, at each
    order of ``alphas``. Every cell of shift ``s`` is at most ``E(s + 1) / s^2``, which decreases in ``s``:
    the shifts where that is below the best cell of shift 1 cannot hold the maximum and are skipped (the
    result is the full grid's)."""
    shifts = np.arange(1, _SHIFT_SEARCH + 2, dtype=np.float64)
    out = np.empty(alphas.shape)
    for index, alpha in enumerate(alphas):
        e = (alpha - 1) * integer_shift_rdp(alpha, shifts, poisson_mean)  # e(s), s = 1 .. S + 1
        best = _far_cells(alpha, e, 1)
        ceiling = integer_shift_rdp(alpha, shifts[1:], poisson_mean) / shifts[:-1] ** 2  # E(s + 1) / s^2
        needed = int(np.sum(ceiling * (1 + 1e-9) >= best))
        if needed > 1:
            best = max(best, _far_cells(alpha, e, needed))
        tail = float(integer_shift_rdp(alpha, np.array(_SHIFT_SEARCH + 1.0), poisson_mean)) / _SHIFT_SEARCH**2
        out[index] = max(best, tail)
    return out


def _compute_coefficients(poisson_mean: float) -> np.ndarray:
    """``kappa_alpha(lambda)`` for ``alpha = 2 .. MAX_ORDER``."""
    alphas = np.arange(2, MAX_ORDER + 1, dtype=np.float64)
    kappa: np.ndarray = np.maximum(_near_coefficients(alphas, poisson_mean), _far_coefficients(alphas, poisson_mean))
    return kappa


@functools.lru_cache(maxsize=256)
def _coefficients(poisson_mean: float) -> np.ndarray:
    """``kappa_alpha(lambda)``, ``alpha = 2 .. MAX_ORDER``: kept on disk where it takes long (:mod:`.kappa_cache`)."""
    from .kappa_cache import cached_coefficients

    kappa = cached_coefficients(poisson_mean, _compute_coefficients, MAX_ORDER - 1)
    kappa.setflags(write=False)
    return kappa


def _coefficient(alpha: int, poisson_mean: float) -> float:
    return float(_coefficients(poisson_mean)[alpha - 2])


def rounding_rdp_coefficient(orders: np.ndarray, poisson_mean: float) -> np.ndarray:
    """``kappa_alpha(lambda)`` at each order: inf at non-integer orders and above :data:`MAX_ORDER`."""
    if not (math.isfinite(poisson_mean) and poisson_mean >= MIN_POISSON_MEAN):
        raise PrivacyParameterError(
            f"the per-coordinate rounding analysis needs a Poisson mean >= {MIN_POISSON_MEAN:g}, got {poisson_mean}"
        )
    orders = np.asarray(orders, dtype=np.float64)
    out = np.full(orders.shape, np.inf)
    usable = (orders == np.floor(orders)) & (orders >= 2) & (orders <= MAX_ORDER)
    if np.any(usable):
        out[usable] = _coefficients(float(poisson_mean))[orders[usable].astype(np.int64) - 2]
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


@dataclass(frozen=True)
class PoissonRoundedSkellamEvent(PoissonSampled, RoundedSkellamEvent):
    """:class:`RoundedSkellamEvent` on a batch in which every example is included with probability
    ``sampling_rate`` (add/remove; Zhu and Wang 2019, Theorem 6), as DP-DFA with device noise and
    ``--sampling poisson`` uses it."""

    kind: ClassVar[str] = "poisson_rounded_skellam"


for _cls in (RoundedSkellamEvent, FixedSizeRoundedSkellamEvent, PoissonRoundedSkellamEvent):
    register_event(_cls)
