"""Device noise under Poisson sampling (add/remove): Zhu and Wang's general bound (2019, Theorem 6)
on the lattice events, checked against an independent reference (dp-accounting's exact Poisson
subsampled Gaussian), against exact Renyi divergences of the subsampled mixtures in both directions,
and attacked with a likelihood-ratio test on a 1-D instance."""

from __future__ import annotations

import math
from dataclasses import astuple

import numpy as np
import pytest
from dp_accounting.rdp.rdp_privacy_accountant import _compute_rdp_poisson_subsampled_gaussian
from scipy.special import logsumexp

from opu_hal.privacy import (
    Accountant,
    PoissonDigitizedNoiseEvent,
    PoissonRoundedSkellamEvent,
    PoissonSkellamEvent,
    PrivacyParameterError,
    event_from_dict,
)
from opu_hal.privacy.digitized import CameraRead, difference_pmf
from opu_hal.privacy.skellam import SkellamLattice, required_poisson_mean
from opu_hal.privacy.subsampling import poisson_subsampled_rdp
from tests.test_privacy_attacks import empirical_epsilon
from tests.test_rounding_accounting import _mixture_logpmf

INTEGER_ORDERS = np.array([2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0])


@pytest.mark.parametrize("sigma", [0.5, 0.8, 1.0, 2.0, 5.0])
@pytest.mark.parametrize("q", [0.001, 0.01, 0.04, 0.2, 0.5, 0.9])
def test_the_general_bound_is_never_below_the_exact_poisson_subsampled_gaussian(sigma, q):
    """dp-accounting computes the subsampled Gaussian exactly (Mironov, Talwar and Zhang 2019): a
    bound for any mechanism must be at least that on the Gaussian, and it is exact at order 2."""
    ours = poisson_subsampled_rdp(lambda a: a / (2 * sigma**2), q, INTEGER_ORDERS)
    exact = np.asarray(_compute_rdp_poisson_subsampled_gaussian(q, sigma, list(INTEGER_ORDERS)))
    assert np.all(ours >= exact * (1 - 1e-12))
    assert ours[0] == pytest.approx(exact[0], rel=1e-9)
    assert np.all(ours <= INTEGER_ORDERS / (2 * sigma**2) * (1 + 1e-12))  # never above the unamplified curve


def test_the_bound_is_the_base_curve_at_rate_one_and_inf_off_the_integers():
    def base(a):
        return 0.3 * np.asarray(a, dtype=np.float64)

    orders = np.array([1.5, 2.0, 2.5, 7.0, np.inf])
    out = poisson_subsampled_rdp(base, 1.0, orders)
    assert out[1] == pytest.approx(0.6) and out[3] == pytest.approx(2.1)
    assert np.isinf(out[[0, 2, 4]]).all()
    with pytest.raises(PrivacyParameterError, match="sampling_rate"):
        poisson_subsampled_rdp(base, 0.0, orders)


def _mixture_divergences(log_p: np.ndarray, log_q: np.ndarray, rate: float, alpha: int) -> float:
    """``max(D(mix || P), D(P || mix))`` with ``mix = (1 - rate) P + rate Q``, by direct summation."""
    log_mix = np.logaddexp(math.log1p(-rate) + log_p, math.log(rate) + log_q)
    keep = np.isfinite(log_p)
    up = logsumexp(alpha * log_mix[keep] + (1 - alpha) * log_p[keep]) / (alpha - 1)
    down = logsumexp(alpha * log_p[keep] + (1 - alpha) * log_mix[keep]) / (alpha - 1)
    return float(max(up, down))


@pytest.mark.parametrize("poisson_mean", [4.0, 20.0, 100.0])
@pytest.mark.parametrize("rate", [0.02, 0.2, 0.6])
def test_rounded_skellam_bound_holds_against_exact_subsampled_mixtures(poisson_mean, rate):
    """A 1-D instance: the batch's sum at ``t`` without the example, ``t + s`` with it (``|s| <= c``),
    randomly rounded plus Skellam counts; the Poisson mixture's exact divergence in both directions is
    below the charged curve at every order."""
    c = 1.5
    event = PoissonRoundedSkellamEvent(c, poisson_mean, sampling_rate=rate)
    charged = event.rdp(INTEGER_ORDERS[:6], "add_remove")
    half = int(60 * math.sqrt(2 * poisson_mean) + 200)
    n = np.arange(-half, half + 1, dtype=np.float64)
    for t in (0.0, 0.3, 0.75):
        log_p = _mixture_logpmf(t, n, poisson_mean)
        for shift in (0.4, 1.0, -1.0, 1.5, -1.5):
            log_q = _mixture_logpmf(t + shift, n, poisson_mean)
            for alpha, bound in zip(INTEGER_ORDERS[:6].astype(int), charged):
                assert _mixture_divergences(log_p, log_q, rate, alpha) <= bound


@pytest.mark.parametrize("rate", [0.05, 0.5])
def test_digitized_bound_holds_against_exact_subsampled_mixtures(rate):
    """The same on the digitized reads of an 8-bit camera at 4 e-/DN (one read per count)."""
    camera = CameraRead(60.0, 3.0, 4.0, 8, 10.0, 10000.0)
    c = 2.0
    event = PoissonDigitizedNoiseEvent(*astuple(camera), 1, c, 1, sampling_rate=rate)  # the camera's six fields first
    charged = event.rdp(INTEGER_ORDERS[:5], "add_remove")
    noise = difference_pmf(camera, 1)
    support = noise.support
    n = np.arange(support[0] - 4, support[-1] + 5)

    def law(t: float) -> np.ndarray:
        low, frac = math.floor(t), t - math.floor(t)
        pmf = np.zeros(len(n))
        for step, weight in ((low, 1 - frac), (low + 1, frac)):
            index = support + step - n[0]
            pmf[index] += weight * noise.pmf
        with np.errstate(divide="ignore"):
            return np.log(pmf)

    for t in (0.0, 0.5):
        for shift in (1.0, 2.0, -2.0, 0.7):
            for alpha, bound in zip(INTEGER_ORDERS[:5].astype(int), charged):
                assert _mixture_divergences(law(t), law(t + shift), rate, alpha) <= bound


def test_a_likelihood_ratio_attack_on_a_1d_instance_stays_within_the_charged_epsilon():
    """Release ``R(t + B s) + K`` (``B ~ Bernoulli(q)`` in the world with the example, ``B = 0``
    without), score by the exact log-likelihood ratio; the empirical epsilon is at most the one charged."""
    rate, c, mean = 0.5, 2.0, 4.0
    rng = np.random.default_rng(11)
    trials = 20_000

    def release(with_example: bool) -> np.ndarray:
        x = 0.25 + (c * (rng.random(trials) < rate) if with_example else 0.0)
        rounded = np.floor(x) + (rng.random(trials) < x - np.floor(x))
        return rounded + rng.poisson(mean, trials) - rng.poisson(mean, trials)

    n = np.arange(-80, 81, dtype=np.float64)
    log_p = _mixture_logpmf(0.25, n, mean)
    log_mix = np.logaddexp(math.log1p(-rate) + log_p, math.log(rate) + _mixture_logpmf(0.25 + c, n, mean))
    score = dict(zip(n.astype(int), log_mix - log_p))
    without, with_ = ([score[int(v)] for v in release(w)] for w in (False, True))
    found = empirical_epsilon(np.asarray(without), np.asarray(with_), 1e-5)
    accountant = Accountant("add_remove")
    accountant.step(PoissonRoundedSkellamEvent(c, mean, sampling_rate=rate), 1)
    charged = accountant.get_epsilon(1e-5)
    assert 0.2 < found <= charged  # the attack finds a real effect, never more than the charge


def test_poisson_lattice_events_round_trip_and_are_add_remove_only():
    lattice = SkellamLattice(1000, 1.0, 10.0, "per-coordinate")
    events = [
        lattice.event(600, 20, 1.5, "poisson"),
        SkellamLattice(1000, 1.0, 10.0, "worst-case").event(600, 20, 1.5, "poisson"),
        PoissonDigitizedNoiseEvent(60.0, 3.0, 4.0, 8, 10.0, 10000.0, 2, 2.0, 100, sampling_rate=0.1),
    ]
    assert [type(e) for e in events] == [PoissonRoundedSkellamEvent, PoissonSkellamEvent, PoissonDigitizedNoiseEvent]
    for event in events:
        assert event_from_dict(event.to_dict()) == event
        assert event.relations == ("add_remove",)
        with pytest.raises(Exception, match="replace_one"):
            Accountant("replace_one").step(event, 1)
    with pytest.raises(PrivacyParameterError, match="rejection"):
        lattice.event(600, 20, 1.5, "rejection")


def test_poisson_sampling_needs_less_noise_than_fixed_batches_for_the_same_epsilon():
    """The main job's shape: the Poisson mean per count (lattice units, the sensitivity each relation
    charges) and the noise in units of one example's clipped term (replace-one charges two)."""
    from opu_hal.privacy.run_shape import RunShape

    def shape(sampling: str) -> RunShape:
        return RunShape(
            sampling, 54000, 2048, 792, dimension=1018890, lattice_resolution=23.0, rounding_analysis="per-coordinate"
        )

    poisson, fixed = (required_poisson_mean(5.352, 1e-5, shape(s)) for s in ("poisson", "fixed"))
    z_poisson, z_fixed = math.sqrt(2 * poisson) / 23, math.sqrt(2 * fixed) / 23
    assert 2 * z_fixed / z_poisson > 2.5  # at least 2.5 times less noise on the update
