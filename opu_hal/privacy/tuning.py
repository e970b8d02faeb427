"""Renyi DP of private hyperparameter tuning with a random number of runs (Papernot and Steinke,
"Hyperparameter Tuning with Renyi Differential Privacy", ICLR 2022).

Algorithm 1 of the paper: draw ``K`` from a distribution on ``{1, 2, ...}``, run the private
training ``Q`` (with independently drawn hyperparameters) ``K`` times, and output only the best
run (its hyperparameters, model and score). ``K`` and the other runs must stay secret.

- Definition 1: the truncated negative binomial ``D_{eta, gamma}`` (``eta > -1``, ``0 < gamma < 1``),
  ``P[K = k] = (1 - gamma)^k / (gamma^-eta - 1) * prod_{l=0}^{k-1} (l + eta) / (l + 1)``; ``eta = 0``
  is the logarithmic distribution ``(1 - gamma)^k / (k log(1/gamma))``, ``eta = 1`` the geometric
  ``gamma (1 - gamma)^(k-1)``. Mean ``eta (1 - gamma) / (gamma (1 - gamma^eta))`` (``eta != 0``),
  ``(1/gamma - 1) / log(1/gamma)`` (``eta = 0``).
- Theorem 2: if ``Q`` is ``(lambda, eps)``- and ``(lambda_hat, eps_hat)``-RDP, the tuning is
  ``(lambda, eps')``-RDP with ``eps' = eps + (1 + eta)(1 - 1/lambda_hat) eps_hat
  + (1 + eta) log(1/gamma) / lambda_hat + log(E[K]) / (lambda - 1)``.
- Theorem 6 (``K ~ Poisson(mu)``, so ``K = 0`` happens, with probability ``e^-mu``: Algorithm 1 then
  outputs nothing, ``⊥``): if ``Q`` is ``(lambda, eps)``-RDP and ``(eps_hat, delta_hat)``-DP with
  ``e^eps_hat <= 1 + 1/(lambda - 1)``, the tuning is ``(lambda, eps')``-RDP with
  ``eps' = eps + mu delta_hat + log(mu) / (lambda - 1)``.

:func:`tnb_tuning_rdp` applies Theorem 2 at every order of a grid, minimizing over ``lambda_hat``
in the same grid; :func:`poisson_tuning_rdp` applies Theorem 6 at every order with the largest
``eps_hat`` allowed (``delta_hat`` falls as ``eps_hat`` grows). The results compose with other RDP
curves and convert to (epsilon, delta) with the accountant's conversion (:func:`tuning_epsilon`).

Source of Theorem 6's statement: the paper's text could not be read where this was written; the
statement above is the one Google's ``dp_accounting`` implements and cites as "Theorem 6 of
arXiv 2110.03620v2" (``rdp_privacy_accountant._compute_rdp_repeat_and_select``, Poisson case), and
autodp's ``RDP_selection_poisson`` agrees. ``mu >= 1`` is required here: both implementations
accept no smaller mean or are silent on it, and below 1 the ``log(mu)`` term is negative.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

from .events import PrivacyParameterError, is_real

#: An RDP curve or its orders: a sequence of floats or a 1-d float array.
Curve = Sequence[float] | np.ndarray

#: Largest ``K`` a draw may return: the tail beyond it is below 1e-300 for every allowed law.
MAX_RUNS = 10**6


@dataclass(frozen=True)
class TruncatedNegativeBinomial:
    """Definition 1's ``D_{eta, gamma}`` on ``{1, 2, ...}``."""

    eta: float
    gamma: float

    def __post_init__(self) -> None:
        if not (is_real(self.eta) and math.isfinite(self.eta) and self.eta > -1):
            raise PrivacyParameterError(f"eta must be a finite number > -1, got {self.eta!r}")
        if not (is_real(self.gamma) and 0 < self.gamma < 1):
            raise PrivacyParameterError(f"gamma must be in (0, 1), got {self.gamma!r}")

    @classmethod
    def with_mean(cls, mean: float, eta: float) -> TruncatedNegativeBinomial:
        """The law with ``E[K] = mean`` (``mean > 1``), by bisection on ``gamma`` (the mean falls
        as ``gamma`` grows, from infinity to 1)."""
        if not (is_real(mean) and 1 < mean < MAX_RUNS / 100):
            raise PrivacyParameterError(f"the mean number of runs must be in (1, {MAX_RUNS // 100}), got {mean!r}")
        low, high = 1e-12, 1 - 1e-12
        for _ in range(200):
            middle = 0.5 * (low + high)
            if cls(eta, middle).mean > mean:
                low = middle
            else:
                high = middle
        return cls(eta, 0.5 * (low + high))

    @property
    def mean(self) -> float:
        """``E[K]`` (Definition 1)."""
        eta, gamma = self.eta, self.gamma
        if eta == 0:
            return (1 / gamma - 1) / math.log(1 / gamma)
        return float(eta * (1 - gamma) / (gamma * (1 - gamma**eta)))

    def log_pmf(self, k: np.ndarray) -> np.ndarray:
        """``log P[K = k]`` for integers ``k >= 1`` (Definition 1, in log space)."""
        k = np.asarray(k, dtype=np.float64)
        eta, gamma = self.eta, self.gamma
        if eta == 0:
            log_p: np.ndarray = k * math.log1p(-gamma) - np.log(k) - math.log(math.log(1 / gamma))
            return log_p
        from scipy.special import gammaln

        # prod_{l<k} (l + eta) / (l + 1) = Gamma(k + eta) / (Gamma(eta) k!), its sign that of eta.
        log_prod = (
            gammaln(k + eta) - gammaln(eta) - gammaln(k + 1)
            if eta > 0
            else (gammaln(k + eta) - gammaln(eta + 1) + math.log(-eta) - gammaln(k + 1))
        )
        return k * math.log1p(-gamma) + log_prod - math.log(abs(gamma**-eta - 1))

    def sample(self, uniform: float) -> int:
        """``K`` by inversion of the CDF at ``uniform`` in [0, 1) (from the secure generator)."""
        return sample_by_inversion(self.log_pmf, 1, uniform)

    def tuning_rdp(self, orders: Curve, rdp: Curve) -> np.ndarray:
        """Theorem 2's curve for this law (:func:`tnb_tuning_rdp`)."""
        return tnb_tuning_rdp(orders, rdp, self)

    def describe(self) -> dict[str, object]:
        """The law's public parameters, for a tuning record."""
        return {"distribution": "truncated negative binomial (Definition 1)", "eta": self.eta, "gamma": self.gamma}


def sample_by_inversion(log_pmf: Callable[[np.ndarray], np.ndarray], first: int, uniform: float) -> int:
    """The smallest ``k >= first`` whose CDF exceeds ``uniform`` in [0, 1), for a law on the integers
    from ``first`` given by ``log_pmf`` (summed in blocks of 4096)."""
    if not (is_real(uniform) and 0 <= uniform < 1):
        raise PrivacyParameterError(f"uniform must be in [0, 1), got {uniform!r}")
    total, start, block = 0.0, first, 4096
    while start <= MAX_RUNS:
        cumulative = total + np.cumsum(np.exp(log_pmf(np.arange(start, start + block))))
        hit = np.nonzero(cumulative > uniform)[0]
        if hit.size:
            return int(start + hit[0])
        total, start = float(cumulative[-1]), start + block
    return MAX_RUNS  # only for uniform within rounding of 1


@dataclass(frozen=True)
class PoissonRuns:
    """``K ~ Poisson(mu)`` on ``{0, 1, ...}`` (Theorem 6); ``K = 0`` outputs ``⊥``."""

    mu: float

    def __post_init__(self) -> None:
        if not (is_real(self.mu) and 1 <= self.mu < MAX_RUNS / 100):
            raise PrivacyParameterError(
                f"the Poisson mean number of runs mu must be in [1, {MAX_RUNS // 100}), got {self.mu!r} "
                "(Theorem 6 is used for mu >= 1 only)"
            )

    @property
    def mean(self) -> float:
        return float(self.mu)

    def log_pmf(self, k: np.ndarray) -> np.ndarray:
        """``log P[K = k] = k log mu - mu - log k!`` for integers ``k >= 0``."""
        from scipy.special import gammaln

        k = np.asarray(k, dtype=np.float64)
        return k * math.log(self.mu) - self.mu - gammaln(k + 1)

    def sample(self, uniform: float) -> int:
        """``K`` by inversion of the CDF at ``uniform`` in [0, 1) (from the secure generator); may be 0."""
        return sample_by_inversion(self.log_pmf, 0, uniform)

    def tuning_rdp(self, orders: Curve, rdp: Curve, delta_hat: Callable[[float], float] | None = None) -> np.ndarray:
        """Theorem 6's curve for this law (:func:`poisson_tuning_rdp`)."""
        return poisson_tuning_rdp(orders, rdp, self, delta_hat)

    def describe(self) -> dict[str, object]:
        return {"distribution": "Poisson (Theorem 6; K = 0 outputs nothing)", "mu": self.mu}


@dataclass(frozen=True)
class FixedRuns:
    """``K = runs``, public: the tuning trains ``runs`` candidates and releases the best. With ``K``
    known, Algorithm 1 is the composition of ``runs`` runs followed by a selection (post-processing),
    so its RDP curve is ``runs`` times the per-run curve (RDP composition, Mironov 2017, Prop. 1).
    Nothing about ``K`` is secret, so the tuning's duration and its files' times may be public.
    At a small mean this costs about what a secret ``K`` saves: at a total (8, 1e-5) with a final run,
    a Gaussian run gets epsilon 4.22 with ``runs = 2`` and 4.34 with a geometric ``K`` of mean 2
    (``tests/test_tuning_truncation.py`` computes both)."""

    runs: int

    def __post_init__(self) -> None:
        if not (isinstance(self.runs, int) and not isinstance(self.runs, bool) and 1 <= self.runs <= 1000):
            raise PrivacyParameterError(f"a fixed number of runs must be an integer in [1, 1000], got {self.runs!r}")

    @property
    def mean(self) -> float:
        return float(self.runs)

    def log_pmf(self, k: np.ndarray) -> np.ndarray:
        """``0`` at ``k = runs``, ``-inf`` elsewhere."""
        k = np.asarray(k, dtype=np.float64)
        return np.where(k == self.runs, 0.0, -np.inf)

    def sample(self, uniform: float) -> int:
        """Always ``runs`` (``uniform`` is ignored: nothing is random)."""
        return self.runs

    def tuning_rdp(self, orders: Curve, rdp: Curve) -> np.ndarray:
        """``runs`` times the per-run curve: the candidates composed."""
        _, eps = _check_curve(orders, rdp)
        return self.runs * eps

    def describe(self) -> dict[str, object]:
        return {"distribution": "fixed (public K: the candidates composed)", "runs": self.runs}


def _check_curve(orders: Curve, rdp: Curve) -> tuple[np.ndarray, np.ndarray]:
    lam = np.asarray(orders, dtype=np.float64)
    eps = np.asarray(rdp, dtype=np.float64)
    if lam.shape != eps.shape or lam.ndim != 1 or not np.all(lam > 1):
        raise PrivacyParameterError("orders must be > 1 and match the RDP curve one to one")
    if np.isnan(eps).any() or (eps < 0).any():
        raise PrivacyParameterError("the per-run RDP curve must be >= 0 and not NaN")
    return lam, eps


def poisson_tuning_rdp(
    orders: Curve, rdp: Curve, law: PoissonRuns, delta_hat: Callable[[float], float] | None = None
) -> np.ndarray:
    """Theorem 6 at every order ``lambda`` of ``orders``: the RDP of the best of ``K ~ Poisson(mu)``
    runs (``⊥`` when ``K = 0``) of a mechanism whose RDP curve is ``rdp``, with
    ``eps_hat = log(1 + 1/(lambda - 1))`` and ``delta_hat = delta_hat(eps_hat)``: by default the
    curve's own conversion to (eps_hat, delta_hat)-DP (Canonne, Kamath and Steinke 2020, Prop. 12,
    dp_accounting's ``compute_delta``); a caller that knows the mechanism's exact privacy profile may
    pass it. Infinite where the per-run curve is."""
    lam, eps = _check_curve(orders, rdp)
    if delta_hat is None:

        def delta_hat(epsilon: float) -> float:
            return float(rdp_lib.compute_delta(lam, eps, epsilon)[0])

    out = np.full_like(lam, np.inf)
    for i, (order, value) in enumerate(zip(lam, eps)):
        if math.isfinite(value):
            hat = float(delta_hat(math.log1p(1 / (order - 1))))
            if not (is_real(hat) and 0 <= hat <= 1):
                raise PrivacyParameterError(f"delta_hat must be in [0, 1], got {hat!r}")
            out[i] = value + law.mu * hat + math.log(law.mu) / (order - 1)
    return out


def tnb_tuning_rdp(orders: Curve, rdp: Curve, law: TruncatedNegativeBinomial) -> np.ndarray:
    """Theorem 2 at every order ``lambda`` of ``orders``: the RDP of the best of ``K ~ law`` runs of
    a mechanism whose RDP curve is ``rdp``, minimized over ``lambda_hat`` in ``orders``."""
    lam, eps = _check_curve(orders, rdp)
    factor = 1 + law.eta
    with np.errstate(invalid="ignore"):
        # The lambda_hat term; an infinite eps_hat is unusable, not an error (some events are
        # valid on a part of the grid only).
        hat = np.where(np.isfinite(eps), factor * (1 - 1 / lam) * eps + factor * math.log(1 / law.gamma) / lam, np.inf)
    return eps + float(np.min(hat)) + math.log(law.mean) / (lam - 1)


#: The laws of ``K`` that ``opu-hal tune`` offers.
RunsLaw = TruncatedNegativeBinomial | PoissonRuns | FixedRuns


def tuning_epsilon(orders: Curve, rdp: Curve, delta: float) -> tuple[float, float]:
    """(epsilon, order) of an RDP curve at ``delta``: the accountant's conversion (dp_accounting's
    ``compute_epsilon``, Canonne, Kamath and Steinke 2020, Prop. 12)."""
    if not (is_real(delta) and 0 < delta < 1):
        raise PrivacyParameterError(f"delta must be in (0, 1), got {delta!r}")
    epsilon, order = rdp_lib.compute_epsilon(
        np.asarray(orders, dtype=np.float64), np.asarray(rdp, dtype=np.float64), delta
    )
    if math.isnan(epsilon):
        raise PrivacyParameterError("epsilon came out NaN")
    return float(epsilon), float(order)


def runs_tail(law: RunsLaw, slots: int) -> float:
    """``P[K > slots]`` under ``law``, summed from the tail's own terms (no ``1 - CDF`` cancellation)."""
    if not (isinstance(slots, int) and 1 <= slots < MAX_RUNS):
        raise PrivacyParameterError(f"slots must be an integer in [1, {MAX_RUNS}), got {slots!r}")
    total, start, block = 0.0, slots + 1, 4096
    while start <= MAX_RUNS:
        terms = np.exp(law.log_pmf(np.arange(start, start + block)))
        total += float(terms.sum())
        if terms[-1] <= 1e-300 or terms[-1] < 1e-18 * total:
            break
        start += block
    return min(total, 1.0)


def sample_within(law: RunsLaw, slots: int, uniform: float) -> int:
    """``K ~ law`` conditioned on ``K <= slots``, by inversion at ``uniform * P[K <= slots]``."""
    tail = runs_tail(law, slots)
    return min(law.sample(uniform * (1 - tail)), slots)


def truncation_delta(law: RunsLaw, slots: int, epsilon: float, delta: float) -> float:
    """The delta of Algorithm 1 with ``K`` conditioned on ``K <= slots`` (issue 44, item 2), when
    Algorithm 1 with ``K ~ law`` is ``(epsilon, delta)``-DP: ``(delta + e^epsilon t) / (1 - t)`` with
    ``t = P[K > slots]``. Proof: the conditioned output law is ``P_m = P[. , K <= m] / (1 - t)``, so
    ``P_m(S) <= P(S) / (1 - t) <= (e^eps Q(S) + delta) / (1 - t)`` and ``Q(S) <= Q[S, K <= m] + t =
    (1 - t) Q_m(S) + t``; the same holds for the final run composed after it (its randomness is
    independent of ``K``). Epsilon is unchanged."""
    if not (is_real(delta) and 0 <= delta < 1) or not (is_real(epsilon) and epsilon >= 0):
        raise PrivacyParameterError(f"need epsilon >= 0 and delta in [0, 1), got {epsilon!r}, {delta!r}")
    tail = runs_tail(law, slots)
    if tail >= 1:
        return 1.0
    return min(1.0, (delta + math.exp(min(epsilon, 700.0)) * tail) / (1 - tail))


def slots_for(law: RunsLaw, epsilon: float, delta: float, conversion_delta: float) -> int:
    """The fewest slots whose truncation keeps Algorithm 1 (with the final run), ``(epsilon,
    conversion_delta)``-DP untruncated, within ``delta`` (:func:`truncation_delta`)."""
    if not conversion_delta <= delta:
        raise PrivacyParameterError(f"conversion_delta {conversion_delta!r} must be at most delta {delta!r}")
    low, high = 1, 1
    while truncation_delta(law, high, epsilon, conversion_delta) > delta:
        low, high = high + 1, high * 2
        if high >= MAX_RUNS:
            raise PrivacyParameterError(f"no number of slots below {MAX_RUNS} truncates K within delta {delta!r}")
    while low < high:
        middle = (low + high) // 2
        if truncation_delta(law, middle, epsilon, conversion_delta) <= delta:
            high = middle
        else:
            low = middle + 1
    return high
