"""Issue 18: the accountant is never optimistic and never silent (each test failed before the fix).

Item 1 (paper 000's eq. 17, photonic DP-DFA) is in ``test_photonic_claim.py``.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings
from dataclasses import dataclass
from typing import ClassVar

import dp_accounting
import mpmath
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

from opu_hal import OpuHalError
from opu_hal.cli import main
from opu_hal.privacy import (
    EVENT_TYPES,
    Accountant,
    ComposedEvent,
    Event,
    FixedSizeGaussianEvent,
    GaussianEvent,
    PoissonGaussianEvent,
    PrivacyBudget,
    PrivacyParameterError,
    SampledWithRejectionGaussianEvent,
    UnboundedEvent,
    event_from_dict,
    register_event,
    smallest_noise_multiplier,
)
from tests.training_helpers import MNIST_BATCHES, cli_argv

DELTA = 1e-5


# -- item 2: NaN never becomes epsilon 0 ---------------------------------------------------------
def test_orders_with_infinity_are_refused_instead_of_giving_epsilon_zero():
    with pytest.raises(PrivacyParameterError, match="orders"):
        Accountant("add_remove", [2.0, 8.0, float("inf")])  # was: epsilon 0.0 after 5000 steps (5.68 without inf)
    for bad in ([], [0.5, 2.0], [1.0, 2.0], [float("nan")], [[2.0, 3.0]], ["two"]):
        with pytest.raises(PrivacyParameterError, match="orders"):
            Accountant("add_remove", bad)


def test_a_zero_count_lookahead_keeps_the_spent_epsilon():
    accountant = Accountant("add_remove")
    accountant.step(PoissonGaussianEvent(0.01, 1.0), 5000)
    spent = accountant.get_epsilon(DELTA)
    # The rejection event's curve is infinite outside Theorem 3.5's orders: 0 * inf was NaN, read as 0.
    rejection = SampledWithRejectionGaussianEvent(0.01, 4.0, 300, 60_000)
    assert accountant.epsilon_after(rejection, 0, DELTA) == spent == pytest.approx(4.589, abs=1e-3)
    accountant.step(UnboundedEvent("x"), 0)
    assert accountant.get_epsilon(DELTA) == spent
    assert PrivacyBudget(spent * 0.99, DELTA).allows(accountant, rejection, 0) is False


# -- item 3: one noise-multiplier convention for RDP and PLD -------------------------------------
def test_gaussian_pld_is_the_same_under_either_relation_and_below_rdp():
    """z = std / sensitivity under the accountant's relation: a Gaussian with z = 1 is one mechanism,
    whichever relation the sensitivity was taken under (was: replace-one PLD 284.4 > RDP 96.1)."""
    epsilons = {}
    for relation in ("add_remove", "replace_one"):
        accountant = Accountant(relation)
        accountant.step(GaussianEvent(1.0), 100)
        epsilons[relation] = (accountant.get_epsilon(DELTA), accountant.get_epsilon_pld(DELTA, 1e-3))
    assert epsilons["add_remove"] == pytest.approx(epsilons["replace_one"], rel=1e-12)
    rdp, pld = epsilons["replace_one"]
    assert rdp == pytest.approx(96.12, abs=0.01) and pld == pytest.approx(91.82, abs=0.01)


PLD_CASES = [
    ("add_remove", GaussianEvent(0.8), 1),
    ("add_remove", GaussianEvent(2.0), 50),
    ("replace_one", GaussianEvent(0.8), 1),
    ("replace_one", GaussianEvent(2.0), 50),
    ("add_remove", PoissonGaussianEvent(0.01, 0.7), 200),
    ("add_remove", PoissonGaussianEvent(0.3, 1.5), 20),
    ("add_remove", PoissonGaussianEvent(0.9, 3.0), 5),
    ("add_remove", PoissonGaussianEvent(0.004, 1.1), 3000),
]


@pytest.mark.parametrize("relation, event, steps", PLD_CASES)
def test_pld_never_exceeds_rdp_for_every_event_and_relation_the_pld_covers(relation, event, steps):
    accountant = Accountant(relation)
    accountant.step(event, steps)
    interval = 1e-3  # a coarse grid is faster and still pessimistic: allow one interval per step
    assert accountant.get_epsilon_pld(DELTA, interval) <= accountant.get_epsilon(DELTA) + 2 * interval


def test_every_event_either_has_a_pld_under_the_convention_or_is_refused():
    covered = {type(event) for _, event, _ in PLD_CASES}
    for cls in set(EVENT_TYPES.values()):
        assert cls.pld_supported == (cls in covered), cls.__name__
    accountant = Accountant("replace_one")
    accountant.step(FixedSizeGaussianEvent(1000, 10, 1.0))
    with pytest.raises(PrivacyParameterError, match="PLD accountant does not cover"):
        accountant.get_epsilon_pld(DELTA)


# -- item 5: inputs ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call",
    [
        lambda: Accountant("add_remove").epsilon_after(GaussianEvent(1.0), -3, DELTA),
        lambda: Accountant("add_remove").step(GaussianEvent(1.0), 2.5),
        lambda: Accountant("add_remove").step(GaussianEvent(1.0), True),
        lambda: PoissonGaussianEvent(True, 1.0),
        lambda: PoissonGaussianEvent(0.1, np.bool_(True)),
        lambda: FixedSizeGaussianEvent(True, 1, 1.0),
        lambda: FixedSizeGaussianEvent(10, True, 1.0),
        lambda: PrivacyBudget(float("inf"), DELTA),
        lambda: GaussianEvent(1e200),
        lambda: smallest_noise_multiplier(lambda z: GaussianEvent(z), 10, float("inf"), DELTA, "add_remove"),
        lambda: Accountant.from_dict(
            {
                "version": 1,
                "neighboring": "add_remove",
                "orders": [2.0, 3.0],
                "entries": [{"event": {"kind": "gaussian", "noise_multiplier": 1.0}, "count": 2.5}],
            }
        ),
        lambda: event_from_dict({"kind": "gaussian", "noise_multiplier": 1.0, "extra": 1}),
    ],
)
def test_bad_inputs_are_refused_with_a_privacy_parameter_error(call):
    with pytest.raises(PrivacyParameterError):
        call()


def test_numpy_scalars_are_ordinary_inputs_and_the_ledger_still_round_trips():
    accountant = Accountant("add_remove")
    accountant.step(PoissonGaussianEvent(np.float32(0.01), np.float64(1.0)), np.int64(10))
    fixed = Accountant("replace_one")
    fixed.step(FixedSizeGaussianEvent(np.int64(1000), np.int32(10), np.float32(1.5)), np.int64(3))
    for original in (accountant, fixed):
        restored = Accountant.from_json(original.to_json())
        assert np.array_equal(restored.rdp, original.rdp) and original.get_epsilon(np.float64(DELTA)) > 0
        assert restored.ledger[0].event == original.ledger[0].event


def test_a_composition_of_events_with_no_common_relation_is_refused_naming_them():
    with pytest.raises(
        PrivacyParameterError, match="PoissonGaussianEvent: add_remove.*FixedSizeGaussianEvent: replace_one"
    ):
        ComposedEvent((PoissonGaussianEvent(0.1, 1.0), FixedSizeGaussianEvent(100, 10, 1.0)))


def test_extreme_noise_multipliers_give_a_valid_curve():
    """Rounding made the library's curve negative at q = 1e-6, z = 1e8: refused before, now the
    unsampled Gaussian's alpha / (2 z^2) stands in (an upper bound)."""
    accountant = Accountant("add_remove")
    accountant.step(PoissonGaussianEvent(1e-6, 1e8), 10)
    assert (accountant.rdp >= 0).all() and accountant.get_epsilon(DELTA) == 0.0


def test_privacy_errors_are_opu_hal_errors():
    assert issubclass(PrivacyParameterError, OpuHalError) and issubclass(PrivacyParameterError, ValueError)


# -- event registry (extensible ledgers) ---------------------------------------------------------
def test_a_ledger_with_any_built_in_event_restores_in_a_fresh_process():
    """The Skellam events register in their own module: importing opu_hal.privacy must suffice."""
    ledger = {
        "version": 1,
        "neighboring": "replace_one",
        "orders": [2.0, 3.0],
        "entries": [
            {
                "event": {"kind": "skellam", "l2_sensitivity": 1.0, "l1_sensitivity": 1.0, "poisson_mean": 100.0},
                "count": 2,
            }
        ],
    }
    code = (
        "import json, sys; from opu_hal.privacy import Accountant; "
        "print(Accountant.from_dict(json.loads(sys.argv[1])).get_epsilon(1e-5))"
    )
    out = subprocess.run([sys.executable, "-c", code, json.dumps(ledger)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) > 0


def test_register_event_makes_a_new_kind_restorable_and_refuses_a_taken_kind():
    @register_event
    @dataclass(frozen=True)
    class HalfGaussian(Event):
        noise_multiplier: float
        kind: ClassVar[str] = "test_half_gaussian"
        relations: ClassVar[tuple[str, ...]] = ("add_remove",)

        def rdp(self, orders, neighboring):
            return np.asarray(orders) / (2 * self.noise_multiplier**2)

    try:
        accountant = Accountant()
        accountant.step(HalfGaussian(2.0), 3)
        assert Accountant.from_json(accountant.to_json()).get_epsilon(DELTA) == accountant.get_epsilon(DELTA)

        @dataclass(frozen=True)
        class Impostor(HalfGaussian):
            kind: ClassVar[str] = "gaussian"

        with pytest.raises(PrivacyParameterError, match="already registered to GaussianEvent"):
            register_event(Impostor)
    finally:
        EVENT_TYPES.pop("test_half_gaussian", None)


# -- item 6: CLI ---------------------------------------------------------------------------------
def _account(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["account", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_rejection_sampling_uses_the_smaller_neighbour(capsys):
    code, out, _ = _account(
        capsys,
        "--sampling",
        "rejection",
        "--dataset-size",
        "1000",
        "--batch-size",
        "100",
        "--steps",
        "1000",
        "--noise-multiplier",
        "4",
    )
    assert code == 0 and "epsilon (RDP) = 10.6652" in out and "'min_dataset_size': 999" in out  # was 10.6274


@pytest.mark.parametrize("epochs", ["nan", "inf", "1e300", "-1"])
def test_cli_account_refuses_unusable_epochs_with_a_message(capsys, epochs):
    code, _, err = _account(
        capsys, "--dataset-size", "1000", "--batch-size", "300", "--epochs", epochs, "--noise-multiplier", "1"
    )
    assert code == 2 and "--epochs" in err


def test_cli_account_prints_rdp_then_a_pld_on_a_bounded_grid(capsys):
    """Was: PLD first on a 1e-4 grid (3.7 GB, 24 s here; out of memory on smaller machines), and RDP
    64709 from the library's loose fractional orders; now RDP 21169.1 (exact fractional orders, item
    7) printed first, then the PLD on a grid of at most 1e6 points."""
    code, out, _ = _account(
        capsys, "--dataset-size", "1000", "--batch-size", "300", "--steps", "30000", "--noise-multiplier", "0.4"
    )
    lines = out.splitlines()
    assert code == 0 and lines[1].startswith("epsilon (RDP) = 21169.1") and lines[2].startswith("epsilon (PLD) = ")
    pld = float(lines[2].split()[3])
    assert 17_000 < pld < 21169.1


def test_the_pld_grid_is_bounded_and_a_too_fine_one_is_refused():
    accountant = Accountant()
    accountant.step(PoissonGaussianEvent(0.3, 0.4), 30_000)
    interval = accountant.pld_interval()
    assert 1e-2 < interval < 3e-2  # (U + log 1e15) / 1e6 with U ~ 21400
    with pytest.raises(PrivacyParameterError, match="grid points"):
        accountant.get_epsilon_pld(DELTA, 1e-4)


def test_cli_plan_names_the_relation_of_the_sensitivity_it_expects(capsys):
    assert main(cli_argv("plan", sampling="fixed", **MNIST_BATCHES, steps=20, target_epsilon=8, sensitivity=2)) == 0
    assert "under replace-one (e.g. 2C for a sum clipped to C)" in capsys.readouterr().out
    assert main(cli_argv("plan", **MNIST_BATCHES, steps=20, target_epsilon=8, sensitivity=1, json=True)) == 0
    assert json.loads(capsys.readouterr().out)["sensitivity_relation"] == "add_remove"


def test_cli_plan_refuses_an_infinite_target(capsys):
    assert main(cli_argv("plan", **MNIST_BATCHES, epochs=15, target_epsilon="inf")) == 2  # was: z = 0.01
    assert "--target-epsilon" in capsys.readouterr().err  # the library names quantities; the CLI its flags


# -- item 7: exact fractional orders -------------------------------------------------------------
def _exact_rdp(q: float, z: float, alpha: float) -> float:
    """log E_{x ~ N(0, z^2)}[(1 - q + q exp((2x - 1) / (2 z^2)))^alpha] / (alpha - 1) by mpmath's
    adaptive quadrature at 30 digits (of ``A - 1``, so small values keep their digits)."""
    mpmath.mp.dps = 30
    q_, z_, a_ = mpmath.mpf(q), mpmath.mpf(z), mpmath.mpf(alpha)

    def f(x):
        return mpmath.npdf(x, 0, z_) * (((1 - q_) + q_ * mpmath.exp((2 * x - 1) / (2 * z_ * z_))) ** a_ - 1)

    value = mpmath.quad(f, [-mpmath.inf, -30 * z_, 0, 0.5, a_, a_ + 30 * z_, mpmath.inf])
    return float(mpmath.log1p(value) / (a_ - 1))


@pytest.mark.parametrize(
    "q, z, alpha",
    [(0.3, 8.0, 1.1), (0.5, 0.5, 1.5), (0.9, 1.0, 1.5), (0.001, 0.05, 2.5), (0.01, 1.1, 1.3), (0.99, 0.02, 1.1)],
)
def test_fractional_orders_are_exact_against_mpmath_and_opacus(q, z, alpha):
    from opacus.accountants.analysis.rdp import _compute_rdp

    ours = PoissonGaussianEvent(q, z).rdp(np.array([alpha]), "add_remove")[0]
    exact = _exact_rdp(q, z, alpha)
    assert exact <= ours <= exact * (1 + 2e-6)
    assert _compute_rdp(q, z, alpha) == pytest.approx(exact, rel=1e-6)


def test_fractional_orders_no_longer_inflate_epsilon():
    """dp-accounting's series: 26x at (q 0.3, z 8, alpha 1.1), infinite at (0.5, 0.5, 1.5); epsilon
    3.0x too high at q = 0.3, z = 0.4, 30000 steps (64709 against 21169)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        library = rdp_lib._compute_rdp_poisson_subsampled_gaussian(0.3, 8.0, [1.1])[0]
        ours = PoissonGaussianEvent(0.3, 8.0).rdp(np.array([1.1]), "add_remove")[0]
        assert library / ours > 25
        assert math.isinf(rdp_lib._compute_rdp_poisson_subsampled_gaussian(0.5, 0.5, [1.5])[0])
        reference = dp_accounting.rdp.RdpAccountant()
        reference.compose(dp_accounting.PoissonSampledDpEvent(0.3, dp_accounting.GaussianDpEvent(0.4)), 30_000)
        accountant = Accountant()
        accountant.step(PoissonGaussianEvent(0.3, 0.4), 30_000)
        assert reference.get_epsilon(DELTA) == pytest.approx(64709.1, abs=0.1)
        assert accountant.get_epsilon(DELTA) == pytest.approx(21169.1, abs=0.1)
