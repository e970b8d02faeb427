"""Papernot-Steinke tuning accountant (opu_hal/privacy/tuning.py) against independent references:
Definition 1 by its product formula, Theorem 2 by a direct double loop, the geometric case, and
the exact Renyi divergence of best-of-K on a tiny discrete instance; Theorem 6 (K ~ Poisson) by a
direct evaluation, by dp_accounting's own implementation, and by the exact divergence of best-of-K
(with the output ⊥ when K = 0) on the same instance."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib
from scipy import stats

from opu_hal.privacy import PrivacyParameterError
from opu_hal.privacy.tuning import (
    PoissonRuns,
    TruncatedNegativeBinomial,
    poisson_tuning_rdp,
    tnb_tuning_rdp,
    tuning_epsilon,
)

ORDERS = np.array([1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 32.0, 64.0])


def product_pmf(eta: float, gamma: float, k: int) -> float:
    """Definition 1 written out: (1 - gamma)^k / (gamma^-eta - 1) * prod_{l<k} (l + eta) / (l + 1)."""
    if eta == 0:
        return (1 - gamma) ** k / (k * math.log(1 / gamma))
    product = 1.0
    for j in range(k):
        product *= (j + eta) / (j + 1)
    return (1 - gamma) ** k / (gamma**-eta - 1) * product


@pytest.mark.parametrize("eta", [-0.5, 0.0, 0.5, 1.0, 2.0])
def test_pmf_is_definition_1_and_sums_to_one_with_the_stated_mean(eta):
    law = TruncatedNegativeBinomial(eta, 0.2)
    ks = np.arange(1, 40)
    assert np.exp(law.log_pmf(ks)) == pytest.approx([product_pmf(eta, 0.2, int(k)) for k in ks], rel=1e-10)
    k = np.arange(1, 5000)
    p = np.exp(law.log_pmf(k))
    assert p.sum() == pytest.approx(1, abs=1e-12)
    assert (k * p).sum() == pytest.approx(law.mean, rel=1e-10)


def test_eta_one_is_geometric_and_eta_zero_is_the_limit_of_the_mean():
    law = TruncatedNegativeBinomial(1.0, 0.3)
    k = np.arange(1, 20)
    assert np.exp(law.log_pmf(k)) == pytest.approx(0.3 * 0.7 ** (k - 1), rel=1e-12)
    assert law.mean == pytest.approx(1 / 0.3)
    assert TruncatedNegativeBinomial(1e-7, 0.3).mean == pytest.approx(
        TruncatedNegativeBinomial(0.0, 0.3).mean, rel=1e-5
    )


def test_with_mean_hits_the_mean_and_sampling_inverts_the_cdf():
    law = TruncatedNegativeBinomial.with_mean(10, 1.0)
    assert law.mean == pytest.approx(10, rel=1e-9) and law.gamma == pytest.approx(0.1, rel=1e-9)
    assert law.sample(0.0) == 1 and law.sample(0.0999) == 1 and law.sample(0.1001) == 2
    draws = [law.sample(u) for u in (np.arange(20000) + 0.5) / 20000]  # quantiles: mean of the law
    assert np.mean(draws) == pytest.approx(10, rel=0.01)


def test_theorem_2_equals_a_direct_evaluation_for_the_gaussian_mechanism():
    sigma, eta, gamma = 3.0, 0.5, 0.05
    rdp = ORDERS / (2 * sigma**2)
    law = TruncatedNegativeBinomial(eta, gamma)
    expected_k = eta * (1 - gamma) / (gamma * (1 - gamma**eta))
    direct = []
    for lam, eps in zip(ORDERS, rdp):
        best = min(
            eps
            + (1 + eta) * (1 - 1 / lh) * eh
            + (1 + eta) * math.log(1 / gamma) / lh
            + math.log(expected_k) / (lam - 1)
            for lh, eh in zip(ORDERS, rdp)
        )
        direct.append(best)
    assert tnb_tuning_rdp(ORDERS, rdp, law) == pytest.approx(direct, rel=1e-12)


def test_geometric_case_is_the_papers_corollary():
    """eta = 1: eps' = eps + 2 (1 - 1/lh) eps_hat + 2 log(1/gamma) / lh + log(1/gamma) / (lam - 1)."""
    rdp = ORDERS / 8.0
    gamma = 0.1
    bound = tnb_tuning_rdp(ORDERS, rdp, TruncatedNegativeBinomial(1.0, gamma))
    hat = min(2 * (1 - 1 / lh) * eh + 2 * math.log(1 / gamma) / lh for lh, eh in zip(ORDERS, rdp))
    assert bound == pytest.approx(rdp + hat + math.log(1 / gamma) / (ORDERS - 1), rel=1e-12)


def renyi(p: np.ndarray, q: np.ndarray, lam: float) -> float:
    return float(np.log(np.sum(p**lam * q ** (1 - lam))) / (lam - 1))


def best_of_k(p: np.ndarray, law: TruncatedNegativeBinomial, kmax: int = 4000) -> np.ndarray:
    """Exact law of the best (largest index) of K i.i.d. draws from ``p``: G(F(y)) - G(F(y-1))."""
    weights = np.exp(law.log_pmf(np.arange(1, kmax + 1)))
    cdf = np.concatenate([[0.0], np.cumsum(p)])
    pgf = np.array([np.sum(weights * c ** np.arange(1, kmax + 1)) for c in cdf])
    return np.diff(pgf)


@pytest.mark.parametrize("eta, gamma", [(1.0, 0.1), (0.0, 0.05), (-0.5, 0.02), (2.0, 0.3)])
def test_theorem_2_bounds_the_exact_divergence_of_best_of_k(eta, gamma):
    """A randomized response on 4 ordered outcomes; neighbours shift mass towards the top."""
    p = np.array([0.4, 0.3, 0.2, 0.1])
    q = np.array([0.3, 0.3, 0.2, 0.2])
    per_run = np.array([max(renyi(p, q, lam), renyi(q, p, lam)) for lam in ORDERS])
    law = TruncatedNegativeBinomial(eta, gamma)
    tp, tq = best_of_k(p, law), best_of_k(q, law)
    exact = np.array([max(renyi(tp, tq, lam), renyi(tq, tp, lam)) for lam in ORDERS])
    bound = tnb_tuning_rdp(ORDERS, per_run, law)
    assert np.all(exact <= bound)
    assert not np.allclose(exact, per_run, rtol=1e-3)  # best-of-K is not one run: the instance is not vacuous


def test_tuning_epsilon_exceeds_one_run_and_grows_with_the_mean():
    rdp = ORDERS / (2 * 2.0**2)
    one = tuning_epsilon(ORDERS, rdp, 1e-5)[0]
    small = tuning_epsilon(ORDERS, tnb_tuning_rdp(ORDERS, rdp, TruncatedNegativeBinomial.with_mean(3, 1.0)), 1e-5)[0]
    large = tuning_epsilon(ORDERS, tnb_tuning_rdp(ORDERS, rdp, TruncatedNegativeBinomial.with_mean(30, 1.0)), 1e-5)[0]
    assert one < small < large


@pytest.mark.parametrize("eta, gamma, match", [(-1.0, 0.5, "eta"), (1.0, 1.0, "gamma"), (1.0, 0.0, "gamma")])
def test_laws_outside_definition_1_are_refused(eta, gamma, match):
    with pytest.raises(PrivacyParameterError, match=match):
        TruncatedNegativeBinomial(eta, gamma)


def test_a_curve_of_another_length_is_refused():
    with pytest.raises(PrivacyParameterError, match="orders"):
        tnb_tuning_rdp(ORDERS, ORDERS[:-1], TruncatedNegativeBinomial(1.0, 0.1))


# -- K ~ Poisson (Theorem 6) --------------------------------------------------------------------
def test_poisson_pmf_mean_and_sampling_by_inversion():
    law = PoissonRuns(4.0)
    k = np.arange(0, 200)
    assert np.exp(law.log_pmf(k)) == pytest.approx(stats.poisson.pmf(k, 4.0), rel=1e-10)
    assert law.mean == 4.0
    zero = math.exp(-4.0)  # P[K = 0]: the tuning outputs nothing
    assert law.sample(0.0) == 0 and law.sample(zero * 0.999) == 0 and law.sample(zero * 1.001) == 1
    draws = [law.sample(u) for u in (np.arange(20000) + 0.5) / 20000]
    assert np.mean(draws) == pytest.approx(4.0, rel=0.01)


def gaussian_delta(sigma: float, eps: float) -> float:
    """Exact (eps, delta) of the Gaussian mechanism with sensitivity 1 (Balle and Wang 2018, Thm. 8)."""
    return float(stats.norm.cdf(0.5 / sigma - eps * sigma) - math.exp(eps) * stats.norm.cdf(-0.5 / sigma - eps * sigma))


def test_theorem_6_equals_a_direct_evaluation_and_dp_accountings_implementation():
    sigma, mu = 3.0, 5.0
    rdp = ORDERS / (2 * sigma**2)
    bound = poisson_tuning_rdp(ORDERS, rdp, PoissonRuns(mu))
    direct = [
        eps + mu * rdp_lib.compute_delta(ORDERS, rdp, math.log(lam / (lam - 1)))[0] + math.log(mu) / (lam - 1)
        for lam, eps in zip(ORDERS, rdp)
    ]
    assert bound == pytest.approx(direct, rel=1e-12)
    library = rdp_lib._compute_rdp_repeat_and_select(ORDERS, rdp, mu, np.inf)  # shape infinity: Poisson
    assert bound == pytest.approx(library, rel=1e-12)
    # With the mechanism's exact privacy profile the theorem is tighter, never looser.
    exact = poisson_tuning_rdp(ORDERS, rdp, PoissonRuns(mu), lambda eps: gaussian_delta(sigma, eps))
    assert np.all(exact <= bound) and np.any(exact < bound)
    assert exact == pytest.approx(
        [
            eps + mu * gaussian_delta(sigma, math.log1p(1 / (lam - 1))) + math.log(mu) / (lam - 1)
            for lam, eps in zip(ORDERS, rdp)
        ],
        rel=1e-12,
    )


def best_of_poisson(p: np.ndarray, mu: float) -> np.ndarray:
    """Exact law of the output of best-of-K, K ~ Poisson(mu): ⊥ (K = 0) first, then the outcomes,
    P[best <= y] = E[F(y)^K] = exp(mu (F(y) - 1))."""
    cdf = np.concatenate([[0.0], np.cumsum(p)])
    pgf = np.exp(mu * (cdf - 1))
    return np.concatenate([[pgf[0]], np.diff(pgf)])


def log_renyi(p: np.ndarray, q: np.ndarray, lam: float) -> float:
    """The Renyi divergence in log space (masses down to e^-40 at order 64 overflow the direct sum)."""
    from scipy.special import logsumexp

    return float(logsumexp(lam * np.log(p) + (1 - lam) * np.log(q)) / (lam - 1))


def hockey_stick(p: np.ndarray, q: np.ndarray, eps: float) -> float:
    """The exact delta at eps of a pair of discrete laws, both directions."""
    return float(max(np.maximum(p - math.exp(eps) * q, 0).sum(), np.maximum(q - math.exp(eps) * p, 0).sum()))


@pytest.mark.parametrize("mu", [1.0, 2.5, 10.0, 40.0])
def test_theorem_6_bounds_the_exact_divergence_of_best_of_k(mu):
    p = np.array([0.4, 0.3, 0.2, 0.1])
    q = np.array([0.3, 0.3, 0.2, 0.2])
    per_run = np.array([max(renyi(p, q, lam), renyi(q, p, lam)) for lam in ORDERS])
    tp, tq = best_of_poisson(p, mu), best_of_poisson(q, mu)
    assert tp.sum() == pytest.approx(1) and tp[0] == pytest.approx(math.exp(-mu))
    exact = np.array([max(log_renyi(tp, tq, lam), log_renyi(tq, tp, lam)) for lam in ORDERS])
    assert np.all(np.isfinite(exact))
    law = PoissonRuns(mu)
    tight = poisson_tuning_rdp(ORDERS, per_run, law, lambda eps: hockey_stick(p, q, eps))
    assert np.all(exact <= tight) and np.all(tight <= poisson_tuning_rdp(ORDERS, per_run, law))
    if mu >= 10:
        assert np.all(exact > per_run)  # best of many runs leaks more than one: the instance is not vacuous


@pytest.mark.parametrize("mu", [1.0, 1.5, 20.0, 1e3])
def test_theorem_6_is_never_below_one_run_for_mu_at_least_one(mu):
    """Every term Theorem 6 adds is >= 0 for mu >= 1: tuning never costs less than one run."""
    for rdp in (ORDERS / 8.0, ORDERS / 800.0, np.minimum(ORDERS / 2, 1.5)):
        assert np.all(poisson_tuning_rdp(ORDERS, rdp, PoissonRuns(mu)) >= rdp)


@pytest.mark.parametrize("mu", [0.5, 0.0, -1.0, float("nan"), 1e9])
def test_poisson_means_outside_the_range_are_refused(mu):
    with pytest.raises(PrivacyParameterError, match="mu must be in"):
        PoissonRuns(mu)


def test_theorem_6_is_infinite_where_the_per_run_curve_is():
    rdp = np.where(ORDERS > 10, np.inf, ORDERS / 8.0)
    bound = poisson_tuning_rdp(ORDERS, rdp, PoissonRuns(3.0))
    assert np.all(np.isinf(bound[ORDERS > 10])) and np.all(np.isfinite(bound[ORDERS <= 10]))
