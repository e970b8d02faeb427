"""The per-coordinate accounting of randomized rounding plus Skellam noise (issue 29):
never below the exact Renyi divergences it bounds, tight at large means, and attacked."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.special import logsumexp

import opu_hal
from opu_hal.privacy import Accountant, event_from_dict, rounding
from opu_hal.privacy.mechanisms import SkellamRelease
from opu_hal.privacy.rounding import FixedSizeRoundedSkellamEvent, RoundedSkellamEvent, rounding_rdp_coefficient
from opu_hal.privacy.skellam import SkellamLattice
from tests.test_privacy_attacks import CHANCE_LIMIT, DELTA, empirical_epsilon, lattice_attack


def _mixture_logpmf(t: float, n: np.ndarray, poisson_mean: float) -> np.ndarray:
    """``log P(R(t) + K = n)``: randomized rounding of ``t`` plus Skellam(lambda, lambda)."""
    low = math.floor(t)
    frac = t - low
    below = rounding._skellam_logpmf(n - low, poisson_mean)
    above = rounding._skellam_logpmf(n - low - 1, poisson_mean)
    with np.errstate(divide="ignore"):
        return np.logaddexp(np.log1p(-frac) + below, (np.log(frac) if frac > 0 else -np.inf) + above)


def exact_divergence(alpha: int, t: float, t_other: float, poisson_mean: float) -> float:
    """``D_alpha(L_t_other || L_t)`` by direct summation over the integers."""
    half = int(60 * math.sqrt(2 * poisson_mean) + 200 + abs(t) + abs(t_other))
    n = np.arange(-half, half + 1, dtype=np.float64)
    p, q = _mixture_logpmf(t_other, n, poisson_mean), _mixture_logpmf(t, n, poisson_mean)
    keep = np.isfinite(q)
    return float(logsumexp(alpha * p[keep] + (1 - alpha) * q[keep])) / (alpha - 1)


SHIFTS = [*np.linspace(0.03, 1.0, 12), *np.linspace(1.05, 3.5, 12), -0.4, -1.0, -1.3, -2.6]


@pytest.mark.parametrize("poisson_mean", [4.0, 20.0, 100.0, 539.0])
@pytest.mark.parametrize("alpha", [2, 3, 5, 8, 16])
def test_coefficient_is_never_below_the_exact_divergence_on_a_grid_of_inputs(poisson_mean, alpha):
    kappa = float(rounding_rdp_coefficient(np.array([float(alpha)]), poisson_mean)[0])
    worst = max(
        exact_divergence(alpha, f, f + shift, poisson_mean) / shift**2
        for f in np.linspace(0.0, 0.95, 8)
        for shift in SHIFTS
    )
    assert worst <= kappa


def test_coefficient_is_within_13_percent_of_the_gaussian_constant_at_large_means():
    orders = np.arange(2, 9, dtype=np.float64)
    ratio = rounding_rdp_coefficient(orders, 1e5) / (orders / (4 * 1e5))
    assert np.all((ratio >= 1.0) & (ratio <= 1.13))


def test_exact_divergences_are_near_the_gaussian_constant_so_the_bound_loses_at_most_its_stated_factor():
    # The far case (shifts just above one lattice step) is where the bound is loosest: 1.128.
    exact = max(exact_divergence(4, 0.3, 0.3 + shift, 539.0) / shift**2 for shift in SHIFTS)
    assert exact / (4 / (4 * 539.0)) < 1.01


def test_widening_the_summation_support_does_not_change_the_coefficient(monkeypatch):
    before = rounding._near_terms(100.0)
    narrow = rounding._support(100.0)
    monkeypatch.setattr(rounding, "_support", lambda mean: np.arange(2 * narrow[0], 2 * narrow[-1] + 1))
    after = rounding._near_terms.__wrapped__(100.0)
    assert after[0] == pytest.approx(before[0], rel=1e-12) and after[1] == pytest.approx(before[1], rel=1e-12)
    assert np.allclose(after[2], before[2], rtol=1e-12)


def test_fractional_orders_and_orders_above_the_series_limit_are_infinite():
    values = rounding_rdp_coefficient(np.array([1.5, 2.0, 65.0, 128.0]), 100.0)
    assert np.isinf(values[0]) and np.isfinite(values[1]) and np.all(np.isinf(values[2:]))


def test_tiny_poisson_means_are_refused():
    with pytest.raises(opu_hal.privacy.events.PrivacyParameterError, match="Poisson mean"):
        rounding_rdp_coefficient(np.array([2.0]), 1.0)


def test_rounded_events_round_trip_through_the_ledger():
    for event in (RoundedSkellamEvent(3.0, 50.0), FixedSizeRoundedSkellamEvent(1000, 100, 3.0, 50.0)):
        assert event_from_dict(event.to_dict()) == event


def test_per_coordinate_poisson_mean_does_not_grow_with_the_dimension():
    small, large = (SkellamLattice(d, 1.0, 20.0, "per-coordinate") for d in (10, 10**6))
    assert small.poisson_mean(1.4) == large.poisson_mean(1.4) == pytest.approx((1.4 * 20) ** 2 / 2)
    worst = SkellamLattice(10**6, 1.0, 20.0, "worst-case")
    assert worst.poisson_mean(1.4) / large.poisson_mean(1.4) == pytest.approx(10**6 * (21 / 20) ** 2)


def test_per_coordinate_noise_is_the_gaussian_equivalent_noise():
    lattice = SkellamLattice(100, 0.3, 8.0, "per-coordinate")
    assert lattice.noise_std(lattice.poisson_mean(1.7)) == pytest.approx(1.7 * 0.3)


# -- attacks on the per-coordinate release -------------------------------------------------------------
def _release(resolution: float, z: float, profile: str = "torch-cpu") -> SkellamRelease:
    lattice = SkellamLattice(1, 1.0, resolution, "per-coordinate")
    return SkellamRelease(opu_hal.load_device(profile), lattice, lattice.poisson_mean(z))


def _claim(release: SkellamRelease) -> float:
    accountant = Accountant("replace_one")
    accountant.step(RoundedSkellamEvent(release.lattice.l2_sensitivity, release.poisson_mean))
    return accountant.get_epsilon(DELTA)


def _llr_scores(release: SkellamRelease, accounted_mean: float, start: float, trials: int = 20_000):
    """Exact likelihood-ratio scores of the mixtures for u = start and u = start + Delta."""
    gamma = release.lattice.gamma
    t0, t1 = start * gamma, (start + release.lattice.sensitivity) * gamma

    def llr(y: torch.Tensor) -> np.ndarray:
        n = np.rint(y.numpy() * gamma)
        return _mixture_logpmf(t1, n, accounted_mean) - _mixture_logpmf(t0, n, accounted_mean)

    base = torch.full((trials,), start, dtype=torch.float64)
    return llr(release.release(base)), llr(release.release(base + release.lattice.sensitivity))


@pytest.mark.parametrize("start", [0.0, 0.37])
def test_likelihood_ratio_test_stays_within_the_per_coordinate_claim(start):
    release = _release(resolution=2.0, z=2.0)  # lambda = 8: few counts, the analysis at its weakest
    s0, s1 = _llr_scores(release, release.poisson_mean, start)
    assert empirical_epsilon(s0, s1, DELTA) <= _claim(release)


def test_likelihood_ratio_test_catches_counts_ten_times_smaller_than_claimed():
    honest = _release(resolution=2.0, z=6.0)
    broken = SkellamRelease(honest.device, honest.lattice, honest.poisson_mean / 100)
    s0, s1 = _llr_scores(broken, broken.poisson_mean, 0.37)
    assert empirical_epsilon(s0, s1, DELTA) > _claim(honest)


def test_lattice_attack_is_at_chance_on_the_per_coordinate_release():
    lattice = SkellamLattice(64, 1.0, 20.0, "per-coordinate")
    release = SkellamRelease(opu_hal.load_device("opu-sim-dp"), lattice, lattice.poisson_mean(1.4))
    assert lattice_attack(release, step=1 / lattice.gamma, separation=1e-5) <= CHANCE_LIMIT
