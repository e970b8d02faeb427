"""Conditioning K on K <= slots (issue 44, item 2; opu_hal/privacy/tuning.py): the tail against
scipy.stats' laws, the conditioned draw, and the delta bound against the exact hockey-stick
divergence of best-of-K on a tiny discrete instance."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from opu_hal.privacy.tuning import (
    PoissonRuns,
    TruncatedNegativeBinomial,
    runs_tail,
    sample_within,
    slots_for,
    truncation_delta,
)


@pytest.mark.parametrize(
    "law, reference",
    [
        (TruncatedNegativeBinomial.with_mean(2, 1.0), lambda g, m: stats.geom(g).sf(m)),
        (TruncatedNegativeBinomial.with_mean(3, 0.0), lambda g, m: stats.logser(1 - g).sf(m)),
        (
            TruncatedNegativeBinomial.with_mean(3, 2.5),
            lambda g, m: stats.nbinom(2.5, g).sf(m) / (1 - stats.nbinom(2.5, g).pmf(0)),
        ),
        (PoissonRuns(1.5), lambda g, m: stats.poisson(1.5).sf(m)),
    ],
    ids=["geometric", "logarithmic", "negative-binomial-2.5", "poisson"],
)
@pytest.mark.parametrize("slots", [1, 4, 12])
def test_the_tail_beyond_the_slots_matches_scipy(law, reference, slots):
    gamma = getattr(law, "gamma", None)
    assert runs_tail(law, slots) == pytest.approx(reference(gamma, slots), rel=1e-9)


def test_the_conditioned_draw_stays_within_the_slots_and_keeps_the_law_below_them():
    law, slots = TruncatedNegativeBinomial.with_mean(4, 1.0), 6
    kept = 1 - runs_tail(law, slots)
    assert sample_within(law, slots, 1 - 1e-15) == slots and sample_within(law, slots, 0.0) == 1
    for k in range(1, slots):  # P[K <= k | K <= slots]: the uniform just below it draws k, just above k + 1
        cdf = float(np.exp(law.log_pmf(np.arange(1, k + 1))).sum()) / kept
        assert sample_within(law, slots, cdf * (1 - 1e-9)) == k and sample_within(law, slots, cdf * (1 + 1e-9)) == k + 1


def _best_of(p: float, weights: np.ndarray) -> np.ndarray:
    """Output law of the best of K Bernoulli(p) scores (K from 1 on, with ``weights``): (P[0], P[1])."""
    k = np.arange(1, len(weights) + 1)
    zero = float(np.sum(weights * (1 - p) ** k))
    return np.array([zero, 1 - zero])


def _hockey_stick(a: np.ndarray, b: np.ndarray, epsilon: float) -> float:
    return float(np.sum(np.maximum(a - math.exp(epsilon) * b, 0)))


@pytest.mark.parametrize("slots", [1, 2, 3, 5])
def test_the_truncation_delta_bounds_the_exact_divergence_of_the_conditioned_tuning(slots):
    """Best of K ~ geometric Bernoulli(0.3) vs Bernoulli(0.2) scores: the conditioned tuning's exact
    delta at epsilon is at most (delta + e^eps t) / (1 - t), delta the untruncated tuning's exact one."""
    law = TruncatedNegativeBinomial.with_mean(2, 1.0)
    full = np.exp(law.log_pmf(np.arange(1, 400)))
    conditioned = full[:slots] / full[:slots].sum()
    for epsilon in (0.05, 0.3, 1.0):
        for p, q in ((0.3, 0.2), (0.2, 0.3)):
            exact_full = _hockey_stick(_best_of(p, full), _best_of(q, full), epsilon)
            exact_cut = _hockey_stick(_best_of(p, conditioned), _best_of(q, conditioned), epsilon)
            assert exact_cut <= truncation_delta(law, slots, epsilon, exact_full) + 1e-15


def test_slots_for_is_the_fewest_slots_whose_truncation_fits():
    law = TruncatedNegativeBinomial.with_mean(2, 1.0)
    slots = slots_for(law, 8.0, 1e-5, 0.9e-5)
    assert truncation_delta(law, slots, 8.0, 0.9e-5) <= 1e-5 < truncation_delta(law, slots - 1, 8.0, 0.9e-5)
    assert slots == 32  # 0.5^m e^8 / (1 - 0.5^m) <= 1e-6 first at m = 32


# -- K fixed and public: the candidates composed -------------------------------------------------------
def test_a_fixed_k_composes_the_candidates_and_the_final_run_as_dp_accounting_does():
    """Independent reference: dp_accounting's RDP accountant composing the same sampled Gaussian
    ``(runs + 1) x steps`` times equals the fixed law's tuning curve plus one run."""
    import dp_accounting
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

    from opu_hal.privacy import Accountant, PoissonGaussianEvent
    from opu_hal.privacy.tuning import FixedRuns, tuning_epsilon

    per_run = Accountant("add_remove")
    per_run.step(PoissonGaussianEvent(0.02, 1.5), 300)
    law = FixedRuns(3)
    ours = tuning_epsilon(per_run.orders, law.tuning_rdp(per_run.orders, per_run.rdp) + per_run.rdp, 1e-5)[0]
    reference = rdp_lib.RdpAccountant(list(per_run.orders))
    event = dp_accounting.PoissonSampledDpEvent(0.02, dp_accounting.GaussianDpEvent(1.5))
    reference.compose(event, 300 * 4)
    assert ours == pytest.approx(reference.get_epsilon(1e-5), rel=1e-6)


def test_a_fixed_k_of_two_leaves_a_run_about_what_a_secret_geometric_k_of_mean_two_does():
    """The figures of :class:`~opu_hal.privacy.tuning.FixedRuns`' docstring: a Gaussian run's epsilon
    when two candidates and the final run spend (8, 1e-5) in total, fixed K against Theorem 2."""
    from scipy.optimize import brentq

    from opu_hal.privacy.tuning import FixedRuns, tuning_epsilon

    orders = np.concatenate([np.linspace(1.1, 10.9, 99), np.arange(11, 256)])

    def per_run_at_total(law) -> float:
        def total(rho: float) -> float:
            rdp = rho * orders
            return tuning_epsilon(orders, law.tuning_rdp(orders, rdp) + rdp, 1e-5)[0] - 8.0

        return tuning_epsilon(orders, brentq(total, 1e-4, 10) * orders, 1e-5)[0]

    fixed, secret = per_run_at_total(FixedRuns(2)), per_run_at_total(TruncatedNegativeBinomial.with_mean(2, 1.0))
    assert fixed == pytest.approx(4.22, abs=0.01) and secret == pytest.approx(4.34, abs=0.01)


def test_a_fixed_k_draws_nothing_and_refuses_a_non_integer_count():
    from opu_hal.privacy.events import PrivacyParameterError
    from opu_hal.privacy.tuning import FixedRuns

    assert FixedRuns(2).sample(0.999) == 2 and runs_tail(FixedRuns(2), 2) == 0.0
    for bad in (0, 2.5, True, 1001):
        with pytest.raises(PrivacyParameterError, match="integer in"):
            FixedRuns(bad)  # type: ignore[arg-type]
