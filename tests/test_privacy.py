"""Privacy accounting against independent references, hand computations and its own invariants."""

from __future__ import annotations

import json
import math

import dp_accounting
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opacus.accountants.analysis.rdp import compute_rdp as opacus_compute_rdp
from opacus.accountants.analysis.rdp import get_privacy_spent as opacus_privacy_spent
from scipy import integrate, stats

from opu_hal.cli import main
from opu_hal.privacy import (
    DEFAULT_ORDERS,
    Accountant,
    FixedSizeGaussianEvent,
    GaussianEvent,
    PhotonicDFAEvent,
    PoissonGaussianEvent,
    PrivacyBudget,
    PrivacyParameterError,
    SampledWithRejectionGaussianEvent,
    smallest_noise_multiplier,
)
from tests.training_helpers import MNIST_BATCHES, cli_argv

DELTA = 1e-5
GRID = [(q, z, steps) for q in (0.001, 0.01, 0.1, 1.0) for z in (0.6, 1.0, 2.0, 5.0) for steps in (1, 100, 10_000)]


def library_epsilon(event: dp_accounting.DpEvent, steps: int, relation) -> float:
    reference = dp_accounting.rdp.RdpAccountant(list(DEFAULT_ORDERS), relation)
    reference.compose(event, steps)
    return reference.get_epsilon(DELTA)


# -- agreement with the reference libraries ------------------------------------------------------
@pytest.mark.filterwarnings("ignore")  # the library's fractional-order series warns where it does not converge
@pytest.mark.parametrize("q, z, steps", GRID)
def test_poisson_gaussian_epsilon_never_exceeds_dp_accounting_and_equals_opacus(q, z, steps):
    """dp-accounting's fractional orders are loose (issue 18, item 7): ours are exact, so our epsilon is
    never above the library's and equals Opacus's (whose fractional series is exact) to 1e-5."""
    ours = Accountant("add_remove")
    ours.step(PoissonGaussianEvent(q, z), steps)
    library = library_epsilon(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z)),
        steps,
        dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
    )
    orders = list(DEFAULT_ORDERS)
    reference = np.array(opacus_compute_rdp(q=q, noise_multiplier=z, steps=steps, orders=orders))
    opacus_epsilon, _ = opacus_privacy_spent(orders=orders, rdp=reference, delta=DELTA)
    epsilon = ours.get_epsilon(DELTA)
    assert epsilon <= library * (1 + 2e-6)  # ours are rounded up by 1e-6 relative
    assert epsilon == pytest.approx(opacus_epsilon, rel=1e-5)


INTEGER = np.array([float(a).is_integer() for a in DEFAULT_ORDERS])


@pytest.mark.parametrize("q, z, steps", GRID)
def test_poisson_gaussian_rdp_agrees_with_opacus_at_integer_orders(q, z, steps):
    ours = Accountant("add_remove")
    ours.step(PoissonGaussianEvent(q, z), steps)
    reference = np.array(opacus_compute_rdp(q=q, noise_multiplier=z, steps=steps, orders=list(DEFAULT_ORDERS)))
    np.testing.assert_allclose(ours.rdp[INTEGER], reference[INTEGER], rtol=1e-6)


@pytest.mark.filterwarnings("ignore:Optimal order is the")  # Opacus's note on its grid's ends
@pytest.mark.parametrize("q, z, steps", GRID)
def test_fractional_orders_are_never_below_opacus_and_epsilon_never_below_it(q, z, steps):
    """dp-accounting 0.6.0's fractional-order series is looser than Opacus's (and than numerical
    integration, next test): conservative, never optimistic. Epsilon therefore matches Opacus's
    when the optimum is an integer order and is never below it."""
    ours = Accountant("add_remove")
    ours.step(PoissonGaussianEvent(q, z), steps)
    orders = list(DEFAULT_ORDERS)
    reference = np.array(opacus_compute_rdp(q=q, noise_multiplier=z, steps=steps, orders=orders))
    assert (ours.rdp >= reference * (1 - 1e-6)).all()  # exact fractional orders (issue 18, item 7)
    epsilon, order = ours.get_epsilon_and_order(DELTA)
    opacus_epsilon, _ = opacus_privacy_spent(orders=orders, rdp=reference, delta=DELTA)
    assert epsilon >= opacus_epsilon * (1 - 1e-6)
    if float(order).is_integer():
        integer_orders = list(np.asarray(orders)[INTEGER])
        integer_epsilon, _ = opacus_privacy_spent(orders=integer_orders, rdp=reference[INTEGER], delta=DELTA)
        assert epsilon == pytest.approx(integer_epsilon, rel=1e-6)


@pytest.mark.parametrize("q, z, alpha", [(0.1, 1.0, 1.6), (0.1, 2.0, 1.1), (0.1, 1.0, 4.5), (0.01, 5.0, 2.5)])
def test_poisson_gaussian_rdp_is_an_upper_bound_of_the_integrated_divergence(q, z, alpha):
    """Independent reference: the Renyi divergence of the sampled Gaussian by quadrature."""

    def density(x):
        return stats.norm.pdf(x, 0, z) * ((1 - q) + q * math.exp((2 * x - 1) / (2 * z * z))) ** alpha

    value, _ = integrate.quad(density, -50 * z, 50 * z, limit=500, points=[0.5])
    exact = math.log(value) / (alpha - 1)
    ours = PoissonGaussianEvent(q, z).rdp(np.array([alpha]), "add_remove")[0]
    assert ours >= exact * (1 - 1e-6)
    assert opacus_compute_rdp(q=q, noise_multiplier=z, steps=1, orders=[alpha])[0] == pytest.approx(exact, rel=1e-5)


@pytest.mark.parametrize("n, m, z, steps", [(60_000, 256, 1.0, 1000), (1000, 100, 2.0, 50), (500, 1, 0.8, 10)])
def test_fixed_size_gaussian_agrees_with_dp_accounting_replace_one(n, m, z, steps):
    ours = Accountant("replace_one")
    ours.step(FixedSizeGaussianEvent(n, m, z), steps)
    expected = library_epsilon(
        dp_accounting.SampledWithoutReplacementDpEvent(n, m, dp_accounting.GaussianDpEvent(z)),
        steps,
        dp_accounting.NeighboringRelation.REPLACE_ONE,
    )
    assert ours.get_epsilon(DELTA) == pytest.approx(expected, rel=1e-6)


def test_gaussian_rdp_is_alpha_over_two_z_squared():
    accountant = Accountant()
    accountant.step(GaussianEvent(2.0), 3)
    np.testing.assert_allclose(accountant.rdp, 3 * np.asarray(DEFAULT_ORDERS) / 8, rtol=1e-12)


def test_pld_epsilon_is_tighter_than_rdp_for_standard_events():
    accountant = Accountant()
    accountant.step(PoissonGaussianEvent(0.01, 1.0), 1000)
    assert accountant.get_epsilon_pld(DELTA) < accountant.get_epsilon(DELTA)


def test_pld_refuses_events_the_library_cannot_take():
    accountant = Accountant("replace_one")
    accountant.step(FixedSizeGaussianEvent(1000, 10, 1.0))
    with pytest.raises(PrivacyParameterError, match="PLD"):
        accountant.get_epsilon_pld(DELTA)


# -- the photonic bound (paper 000, Proposition 3) -----------------------------------------------
PHOTONIC = dict(
    n_l=512, batch_size=256, sigma=0.1, gamma_min=0.5, gamma_max=1.0, tau_h_min=1.0, tau_h_max=1.0, tau_b=1.0
)


def test_photonic_bound_matches_eq17_by_hand():
    # alpha = 2: 512*2*2/(256*0.01) * (1*1*1)^2/(0.5*1)^2 = 3200
    #          + 512*2/(2*1) * log(256*0.25 / (257*0.25 - 1)) = 6.03543...
    event = PhotonicDFAEvent(**PHOTONIC)
    assert event.epsilon_pdfa(np.array([2.0]))[0] == pytest.approx(3206.0354333450455, rel=1e-12)
    assert event.epsilon_pdfa(np.array([8.0]))[0] == pytest.approx(12803.448819054312, rel=1e-12)


def test_photonic_appendix_reading_drops_n_l_from_the_first_term():
    event = PhotonicDFAEvent(**PHOTONIC, first_term="appendix")
    assert event.epsilon_pdfa(np.array([2.0]))[0] == pytest.approx(3200 / 512 + 6.0354333450455, rel=1e-9)


def test_photonic_saturating_case_is_two_alpha_tau_b_squared_over_m_sigma_squared():
    event = PhotonicDFAEvent(**PHOTONIC, case="saturating")
    assert event.epsilon_pdfa(np.array([3.0]))[0] == pytest.approx(2 * 3 / (256 * 0.01))


def test_photonic_bound_is_infinite_without_a_positive_derivative_floor():
    event = PhotonicDFAEvent(**{**PHOTONIC, "gamma_min": 0.0})
    assert np.isinf(event.epsilon_pdfa(np.array([2.0]))).all()


def test_photonic_curve_multiplies_by_columns_and_layers_and_per_epoch_reading_divides():
    base = PhotonicDFAEvent(**PHOTONIC)
    orders = np.asarray(DEFAULT_ORDERS)
    scaled = PhotonicDFAEvent(**PHOTONIC, columns=784, layers=3)
    np.testing.assert_allclose(scaled.rdp(orders, "replace_one"), 784 * 3 * base.rdp(orders, "replace_one"))
    per_epoch = PhotonicDFAEvent(**PHOTONIC, steps_per_epoch=211)
    np.testing.assert_allclose(per_epoch.rdp(orders, "replace_one"), base.rdp(orders, "replace_one") / 211)


def test_photonic_event_needs_replace_one_adjacency():
    with pytest.raises(PrivacyParameterError, match="replace_one"):
        Accountant("add_remove").step(PhotonicDFAEvent(**PHOTONIC))


# -- the sampled-with-rejection Gaussian (paper 004, Theorem 3.5) --------------------------------
def test_srgm_matches_eq9_by_hand():
    event = SampledWithRejectionGaussianEvent(0.01, 5.0, 500, 60_000)
    # q * binom.pmf(499; 60000, 0.01) / binom.sf(499; 60000, 0.01) + 2 * 0.01^2 * 3 / 25
    assert event.rejection_term() == pytest.approx(1.985611024139675e-08, rel=1e-9)
    assert event.gamma(3.0) == pytest.approx(2.40198561102414e-05, rel=1e-9)


@pytest.mark.parametrize(
    "kwargs, says",
    [
        (dict(sampling_rate=0.3, noise_multiplier=5.0, min_batch_size=10, min_dataset_size=1000), "q <= 1/5"),
        (dict(sampling_rate=0.01, noise_multiplier=3.9, min_batch_size=10, min_dataset_size=60_000), "sigma_0 >= 4"),
        (dict(sampling_rate=0.01, noise_multiplier=5.0, min_batch_size=700, min_dataset_size=60_000), "N_B <= q"),
    ],
)
def test_srgm_outside_its_validity_conditions_is_refused(kwargs, says):
    with pytest.raises(PrivacyParameterError, match=says):
        SampledWithRejectionGaussianEvent(**kwargs)


def test_srgm_order_outside_the_theorem_is_refused_and_excluded_from_the_grid():
    event = SampledWithRejectionGaussianEvent(0.01, 4.0, 300, 60_000)
    with pytest.raises(PrivacyParameterError, match="outside Theorem 3.5"):
        event.gamma(1024.0)
    curve = event.rdp(np.asarray(DEFAULT_ORDERS), "add_remove")
    assert np.isinf(curve[-1]) and np.isfinite(curve[0])


# -- properties ----------------------------------------------------------------------------------
rates = st.floats(min_value=1e-4, max_value=0.5)
noises = st.floats(min_value=0.5, max_value=20.0)
counts = st.integers(min_value=1, max_value=5000)


def epsilon_of(q: float, z: float, steps: int) -> float:
    accountant = Accountant()
    accountant.step(PoissonGaussianEvent(q, z), steps)
    return accountant.get_epsilon(DELTA)


@settings(max_examples=30, deadline=None)
@given(rates, noises, counts, st.integers(min_value=1, max_value=5000))
def test_epsilon_grows_with_steps(q, z, steps, more):
    assert epsilon_of(q, z, steps + more) >= epsilon_of(q, z, steps)


@settings(max_examples=30, deadline=None)
@given(rates, rates, noises, counts)
def test_epsilon_grows_with_sampling_rate(q1, q2, z, steps):
    low, high = sorted((q1, q2))
    assert epsilon_of(high, z, steps) >= epsilon_of(low, z, steps) - 1e-12


@settings(max_examples=30, deadline=None)
@given(rates, noises, noises, counts)
def test_epsilon_falls_with_noise(q, z1, z2, steps):
    low, high = sorted((z1, z2))
    # the exact fractional orders come from quadrature (accurate to ~1e-7 relative, rounded up 1e-6)
    assert epsilon_of(q, high, steps) <= epsilon_of(q, low, steps) * (1 + 1e-7) + 1e-12


# -- accountant, ledger, budget, inverse ---------------------------------------------------------
def test_ledger_round_trips_through_json_bit_for_bit():
    accountant = Accountant()
    for _ in range(250):
        accountant.step(PoissonGaussianEvent(0.004, 1.1))
    accountant.step(GaussianEvent(3.0), 2)
    accountant.step(SampledWithRejectionGaussianEvent(0.01, 4.0, 300, 60_000), 7)
    restored = Accountant.from_json(json.loads(json.dumps(accountant.to_json())))
    assert np.array_equal(restored.rdp, accountant.rdp) and restored.steps == 259
    assert restored.get_epsilon(DELTA) == accountant.get_epsilon(DELTA)


def test_stepping_one_at_a_time_equals_stepping_at_once():
    one, many = Accountant(), Accountant()
    for _ in range(100):
        one.step(PoissonGaussianEvent(0.01, 1.0))
    many.step(PoissonGaussianEvent(0.01, 1.0), 100)
    assert np.array_equal(one.rdp, many.rdp)


def test_budget_stops_before_the_step_that_would_cross_the_target():
    budget, accountant = PrivacyBudget(1.0, DELTA), Accountant()
    event = PoissonGaussianEvent(0.01, 2.0)
    while budget.allows(accountant, event):
        accountant.step(event)
    assert budget.spent(accountant) <= 1.0
    assert accountant.epsilon_after(event, 1, DELTA) > 1.0 and accountant.steps > 10


def test_smallest_noise_multiplier_reaches_the_target_and_less_does_not():
    event_for = lambda z: PoissonGaussianEvent(256 / 60_000, z)  # noqa: E731
    z = smallest_noise_multiplier(event_for, 3516, 2.0, DELTA, "add_remove", rtol=1e-5)
    assert epsilon_of(256 / 60_000, z, 3516) <= 2.0
    assert epsilon_of(256 / 60_000, z * (1 - 1e-4), 3516) > 2.0


def test_unreachable_target_is_refused():
    with pytest.raises(PrivacyParameterError, match="does not reach"):
        smallest_noise_multiplier(lambda z: GaussianEvent(z), 10, 1e-6, DELTA, "add_remove", high=10.0)


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda: PoissonGaussianEvent(1.5, 1.0), "sampling_rate"),
        (lambda: PoissonGaussianEvent(0.1, -1.0), "noise_multiplier"),
        (lambda: GaussianEvent(float("nan")), "noise_multiplier"),
        (lambda: FixedSizeGaussianEvent(10, 20, 1.0), "batch_size <= dataset_size"),
        (lambda: Accountant("swap"), "neighboring"),
        (lambda: Accountant().get_epsilon(0.0), "delta"),
        (lambda: Accountant().step(GaussianEvent(1.0), -1), "count"),
    ],
)
def test_invalid_parameters_raise_clear_errors(make, says):
    with pytest.raises(PrivacyParameterError, match=says):
        make()


def test_fixed_size_event_needs_replace_one_adjacency():
    with pytest.raises(PrivacyParameterError, match="replace_one"):
        Accountant("add_remove").step(FixedSizeGaussianEvent(100, 10, 1.0))


# -- CLI -----------------------------------------------------------------------------------------
def test_account_command_prints_rdp_and_pld_epsilon(capsys):
    args = cli_argv("account", **MNIST_BATCHES, epochs=15, noise_multiplier=1.1, json=True)
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["steps"] == 3516 and 0 < result["epsilon_pld"] < result["epsilon_rdp"]
    assert result["epsilon_rdp"] == pytest.approx(epsilon_of(256 / 60_000, 1.1, 3516), rel=1e-12)


def test_plan_command_gives_noise_multiplier_and_device_std(capsys):
    args = cli_argv("plan", **MNIST_BATCHES, epochs=15, target_epsilon=8, sensitivity=0.01, json=True)
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["epsilon_rdp"] <= 8
    assert result["noise_std"] == pytest.approx(result["noise_multiplier"] * 0.01)


def test_account_command_refuses_invalid_srgm_with_exit_2(capsys):
    args = cli_argv("account", sampling="rejection", **MNIST_BATCHES, steps=10, noise_multiplier=2)
    assert main(args) == 2
    assert "sigma_0 >= 4" in capsys.readouterr().err


def test_composed_event_adds_its_parts_and_round_trips_through_the_ledger():
    from opu_hal.privacy import ComposedEvent, FixedSizeGaussianEvent

    a, b = FixedSizeGaussianEvent(1000, 10, 1.0), FixedSizeGaussianEvent(1000, 10, 2.0)
    composed, separate = Accountant("replace_one"), Accountant("replace_one")
    composed.step(ComposedEvent((a, b)), 5)
    separate.step(a, 5)
    separate.step(b, 5)
    assert composed.get_epsilon(1e-5) == pytest.approx(separate.get_epsilon(1e-5), rel=1e-12)
    assert len(composed.ledger) == 1
    assert Accountant.from_json(composed.to_json()).get_epsilon(1e-5) == composed.get_epsilon(1e-5)


def test_noise_search_brackets_from_one_and_never_evaluates_far_noise():
    from opu_hal.privacy.inverse import planned_epsilon

    seen = []

    def event_for(z):
        seen.append(z)
        return GaussianEvent(z)

    z = smallest_noise_multiplier(event_for, 1, 3.0, DELTA, "add_remove")
    assert min(seen) >= 1.0 and max(seen) <= 4.0  # never the default bracket's ends, 1e-2 and 1e3
    assert planned_epsilon(GaussianEvent, z, 1, DELTA, "add_remove") <= 3.0
    assert planned_epsilon(GaussianEvent, z / (1 + 1e-4), 1, DELTA, "add_remove") > 3.0


def test_noise_search_on_few_orders_gives_the_answer_every_order_confirms():
    from opu_hal.privacy import FixedSizeGaussianEvent
    from opu_hal.privacy.inverse import planned_epsilon

    def event_for(z):
        return FixedSizeGaussianEvent(2000, 64, z)

    z = smallest_noise_multiplier(event_for, 50, 2.0, DELTA, "replace_one")
    assert planned_epsilon(event_for, z, 50, DELTA, "replace_one") <= 2.0
    assert planned_epsilon(event_for, z / (1 + 1e-4), 50, DELTA, "replace_one") > 2.0
