"""Issue 18: the accountant is never optimistic and never silent (each test failed before the fix)."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from scipy import optimize, stats

from opu_hal import OpuHalError
from opu_hal.privacy import (
    Accountant,
    FixedSizeGaussianEvent,
    GaussianEvent,
    PhotonicDFAEvent,
    PoissonGaussianEvent,
    PrivacyBudget,
    PrivacyParameterError,
)
from opu_hal.privacy.events import UnboundedEvent

COUNTEREXAMPLE = dict(n_l=10, batch_size=16, sigma=1e4, gamma_min=0.5, gamma_max=1.0, tau_h_min=1.0,
                      tau_h_max=1.0, tau_b=1.0)


def _pair_delta(epsilon: float, n: int, r: float) -> float:
    """delta(epsilon) of N(0, r s^2 I_n) against N(0, s^2 I_n), the direction that is worse here."""
    threshold = (2 * epsilon + n * math.log(r)) / (1 - 1 / r)
    return stats.chi2.sf(threshold / r, n) - math.exp(epsilon) * stats.chi2.sf(threshold, n)


def test_eq17_claims_less_than_a_pair_its_clipping_allows_needs():
    m, g, big = 16, 0.5, 1.0
    r = ((m - 1) * g**2 + big**2) / (m * g**2)
    accountant = Accountant("replace_one")
    accountant.step(PhotonicDFAEvent(**COUNTEREXAMPLE))
    claim = accountant.paper_claim_epsilon(1e-5)
    needed = optimize.brentq(lambda e: _pair_delta(e, 10, r) - 1e-5, 0, 50)
    assert claim == pytest.approx(1.043, abs=1e-3) and needed == pytest.approx(2.625, abs=1e-3)
    assert _pair_delta(claim, 10, r) > 1e-3  # the true delta at the claimed epsilon: 5.8e-3
    # Monte Carlo of the privacy loss, independent of the chi-square closed form.
    rng = np.random.default_rng(0)
    wide, narrow = rng.chisquare(10, 1_000_000) * r, rng.chisquare(10, 1_000_000)
    loss = lambda x: -(5 * math.log(r) - x / 2 * (1 - 1 / r))  # log q/p at ||x||^2 / s^2 = x
    mc = np.mean(loss(wide) > claim) - math.exp(claim) * np.mean(loss(narrow) > claim)
    assert mc == pytest.approx(5.8e-3, rel=0.1)


def test_a_published_claim_is_never_reported_or_budgeted_as_a_guarantee():
    accountant = Accountant("replace_one")
    accountant.step(PhotonicDFAEvent(**COUNTEREXAMPLE))
    with pytest.raises(PrivacyParameterError, match="not a valid bound"):
        accountant.get_epsilon(1e-5)
    with pytest.raises(PrivacyParameterError, match="not a valid bound"):
        PrivacyBudget(8.0, 1e-5).allows(Accountant("replace_one"), PhotonicDFAEvent(**COUNTEREXAMPLE))


def test_an_unbounded_event_gives_infinite_epsilon():
    accountant = Accountant("replace_one")
    accountant.step(UnboundedEvent("no proof"))
    assert math.isinf(accountant.get_epsilon(1e-5))


def test_orders_with_infinity_are_refused_instead_of_giving_epsilon_zero():
    with pytest.raises(PrivacyParameterError, match="orders"):
        Accountant("add_remove", [2.0, 8.0, float("inf")])
    for bad in ([], [0.5, 2.0], [float("nan")]):
        with pytest.raises(PrivacyParameterError):
            Accountant("add_remove", bad)


def test_a_zero_count_lookahead_keeps_the_spent_epsilon():
    accountant = Accountant("add_remove")
    accountant.step(PoissonGaussianEvent(0.01, 1.0), 500)
    spent = accountant.get_epsilon(1e-5)
    assert accountant.epsilon_after(PoissonGaussianEvent(0.01, 1.0), 0, 1e-5) == spent > 0
    accountant.step(UnboundedEvent("x"), 0)  # 0 * inf must not turn into NaN or 0
    assert accountant.get_epsilon(1e-5) == spent


def test_gaussian_pld_never_exceeds_rdp_under_either_relation():
    for relation in ("add_remove", "replace_one"):
        accountant = Accountant(relation)
        accountant.step(GaussianEvent(1.0), 100)
        assert accountant.get_epsilon_pld(1e-5) <= accountant.get_epsilon(1e-5)


@pytest.mark.parametrize("call", [
    lambda: Accountant("add_remove").epsilon_after(GaussianEvent(1.0), -3, 1e-5),
    lambda: Accountant("add_remove").step(GaussianEvent(1.0), 2.5),
    lambda: Accountant("add_remove").step(GaussianEvent(1.0), True),
    lambda: PoissonGaussianEvent(True, 1.0),
    lambda: FixedSizeGaussianEvent(True, 1, 1.0),
    lambda: PrivacyBudget(float("inf"), 1e-5),
    lambda: GaussianEvent(1e200),
    lambda: Accountant.from_dict({"version": 1, "neighboring": "add_remove", "orders": [2.0, 3.0],
                                  "entries": [{"event": {"kind": "gaussian", "noise_multiplier": 1.0}, "count": 2.5}]}),
])
def test_bad_inputs_are_refused_with_a_privacy_parameter_error(call):
    with pytest.raises(PrivacyParameterError):
        call()


def test_numpy_scalars_are_ordinary_inputs():
    accountant = Accountant("add_remove")
    accountant.step(PoissonGaussianEvent(np.float32(0.01), np.float64(1.0)), np.int64(10))
    assert accountant.get_epsilon(np.float64(1e-5)) > 0


def test_privacy_errors_are_opu_hal_errors():
    assert issubclass(PrivacyParameterError, OpuHalError) and issubclass(PrivacyParameterError, ValueError)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainers.cli", *args], capture_output=True, text=True, timeout=120)


def test_cli_rejection_sampling_uses_the_smaller_neighbour():
    out = _cli("account", "--sampling", "rejection", "--dataset-size", "1000", "--batch-size", "100", "--steps",
               "1000", "--noise-multiplier", "4")
    assert out.returncode == 0 and "10.6652" in out.stdout


@pytest.mark.parametrize("epochs", ["nan", "inf", "1e300"])
def test_cli_account_refuses_unusable_epochs_without_a_traceback(epochs):
    out = _cli("account", "--dataset-size", "1000", "--batch-size", "300", "--epochs", epochs, "--noise-multiplier", "1")
    assert out.returncode == 2 and "Traceback" not in out.stderr and "--epochs" in out.stderr


def test_cli_account_prints_rdp_and_skips_a_pld_too_large_for_memory():
    out = _cli("account", "--dataset-size", "1000", "--batch-size", "300", "--steps", "30000", "--noise-multiplier", "0.4")
    # 64709 with the library's loose fractional orders; 21169 with exact ones (item 7).
    assert out.returncode == 0 and "epsilon (RDP) = 21169" in out.stdout and "skipped" in out.stdout


@pytest.mark.parametrize("q, z, alpha", [(0.3, 8.0, 1.1), (0.1, 1.0, 1.6), (0.01, 1.1, 1.5), (0.004, 0.8, 2.5)])
def test_fractional_orders_are_exact_and_never_below_opacus(q, z, alpha):
    from opacus.accountants.analysis.rdp import _compute_rdp

    ours = PoissonGaussianEvent(q, z).rdp(np.array([alpha]), "add_remove")[0]
    reference = _compute_rdp(q, z, alpha)
    assert reference <= ours <= reference * (1 + 1e-5)
