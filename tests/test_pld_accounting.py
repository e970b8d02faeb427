"""PLD conversion of the ledger (Accountant(conversion="pld"), --accounting pld): against Opacus's
PRV accountant (an independent implementation), against a likelihood-ratio attack, and in runs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from opu_hal.privacy import Accountant, FixedSizeGaussianEvent, GaussianEvent, PoissonGaussianEvent
from opu_hal.privacy.events import PrivacyParameterError
from tests.test_privacy_attacks import DELTA, LRT_TRIALS, empirical_epsilon
from tests.training_helpers import clusters
from trainers.core.errors import TrainingConfigError
from trainers.run.config import TrainConfig
from trainers.run.loop import Trainer, train


def quiet(message: str) -> None:
    pass


def pld_epsilon(q: float, z: float, steps: int, delta: float = 1e-5) -> float:
    accountant = Accountant("add_remove", conversion="pld")
    accountant.step(PoissonGaussianEvent(q, z), steps)
    return accountant.get_epsilon(delta)


@pytest.mark.parametrize("q, z, steps", [(0.1517, 3.0, 180), (0.01, 1.0, 1000), (0.3, 6.0, 180), (0.05, 0.8, 300)])
def test_pld_epsilon_agrees_with_opacus_prv_accountant_and_undercuts_rdp(q, z, steps):
    from opacus.accountants import PRVAccountant

    prv = PRVAccountant()
    prv.history = [(z, q, steps)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = prv.get_epsilon(1e-5, eps_error=0.01)
    rdp = Accountant("add_remove")
    rdp.step(PoissonGaussianEvent(q, z), steps)
    ours = pld_epsilon(q, z, steps)
    assert abs(ours - reference) <= 0.02
    assert ours < rdp.get_epsilon(1e-5)


def test_gaussian_release_and_steps_compose_like_opacus_prv():
    from opacus.accountants import PRVAccountant

    prv = PRVAccountant()
    prv.history = [(20.0, 1.0, 1), (3.0, 0.1517, 180)]  # a released mean, then the steps
    accountant = Accountant("add_remove", conversion="pld")
    accountant.step(GaussianEvent(20.0))
    accountant.step(PoissonGaussianEvent(0.1517, 3.0), 180)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = prv.get_epsilon(1e-5, eps_error=0.01)
    assert accountant.get_epsilon(1e-5) == pytest.approx(reference, abs=0.02)


def test_a_run_with_almost_no_noise_falls_back_to_its_rdp_epsilon_instead_of_overflowing():
    # z = 1e-4 (a noise-free diagnostic run): dp-accounting's PLD grid would need exp(interval) > 1.8e308
    event = PoissonGaussianEvent(0.1517, 1e-4)
    rdp, pld = Accountant("add_remove"), Accountant("add_remove", conversion="pld")
    rdp.step(event, 27)
    pld.step(event, 27)
    assert np.isfinite(pld.get_epsilon(1e-5)) and pld.get_epsilon(1e-5) == rdp.get_epsilon(1e-5)
    with pytest.raises(PrivacyParameterError, match="overflows float64"):
        pld.get_epsilon_pld(1e-5)


def test_the_conversion_travels_with_the_ledger():
    accountant = Accountant("add_remove", conversion="pld")
    accountant.step(PoissonGaussianEvent(0.1, 2.0), 50)
    restored = Accountant.from_dict(accountant.to_dict())
    assert restored.conversion == "pld" and restored.get_epsilon(1e-5) == accountant.get_epsilon(1e-5)
    plain = accountant.to_dict()
    del plain["conversion"]  # a ledger written before the option: RDP
    assert Accountant.from_dict(plain).conversion == "rdp"


def test_events_the_pld_does_not_cover_are_refused_naming_the_rdp_option():
    accountant = Accountant("replace_one", conversion="pld")
    with pytest.raises(PrivacyParameterError, match="--accounting rdp"):
        accountant.step(FixedSizeGaussianEvent(1000, 100, 1.0))


def test_budget_checks_agree_with_the_pld_epsilon():
    event = PoissonGaussianEvent(0.2, 2.0)
    accountant = Accountant("add_remove", conversion="pld")
    accountant.step(event, 10)
    target = accountant.epsilon_after(event, 15, 1e-5)
    assert accountant.fits(event, 1, 1e-5, target)  # settles the room once
    assert accountant.fits(event, 15, 1e-5, target) and not accountant.fits(event, 16, 1e-5, target)


@pytest.mark.parametrize("sampled, caught", [(True, False), (False, True)])
def test_likelihood_ratio_test_stays_within_the_pld_epsilon_of_a_sampled_gaussian(sampled, caught):
    """One coordinate, one step at q = 0.1, z = 2: the example is in the batch with probability q
    (honest) or always (a run that claims subsampling it does not do)."""
    q, z = 0.1, 2.0
    claim = pld_epsilon(q, z, 1, DELTA)
    rng = np.random.default_rng()
    without = z * rng.standard_normal(LRT_TRIALS)
    present = rng.random(LRT_TRIALS) < (q if sampled else 1.0)
    with_one = present + z * rng.standard_normal(LRT_TRIALS)
    assert (empirical_epsilon(without, with_one, DELTA) > claim) is caught


def _config(**changes):
    options = dict(features="pixels", epochs=2, batch_size=50, hidden=(16,), alignment=False, target_epsilon=2.0)
    options.update(changes)
    return TrainConfig.for_method(options.pop("method", "dp-sgd"), **options)


def test_a_pld_run_plans_less_noise_and_spends_within_target():
    data = clusters()
    pld = train(_config(accounting="pld"), data=data, progress=False, log=quiet)
    rdp = train(_config(), data=data, progress=False, log=quiet)
    assert pld["privacy"]["ledger"]["conversion"] == "pld"
    assert pld["privacy"]["noise_multiplier"] < 0.97 * rdp["privacy"]["noise_multiplier"]
    assert 0.98 * 2.0 <= pld["final"]["epsilon"] <= 2.0
    assert not pld["privacy"]["stopped_by_budget"]
    ledger = Accountant.from_dict(pld["privacy"]["ledger"])
    assert ledger.get_epsilon(1e-5) == pytest.approx(pld["final"]["epsilon"])


def test_pld_accounting_is_refused_where_it_does_not_apply():
    with pytest.raises(TrainingConfigError, match="--accounting pld applies to private methods"):
        _config(method="bp", target_epsilon=None, accounting="pld")
    with pytest.raises(TrainingConfigError, match="--accounting pld: .*FixedSizeGaussianEvent"):
        Trainer(_config(accounting="pld", sampling="fixed"), data=clusters(), progress=False, log=quiet)
