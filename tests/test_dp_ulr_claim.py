"""DP-ULR's privacy controller (paper 004, eq. 7) is charged as the paper's claim, never as a
guarantee: the ledger holds ControllerClaimEvent (is_guarantee False), a guaranteed epsilon is
refused, the claimed one equals Theorem 3.5's number, and the run plans, stops and reports on the
claim; the sound gaussian mode still gives a guarantee; ``opu-hal tune`` refuses a claim."""

from __future__ import annotations

import json

import pytest

from opu_hal.privacy import (
    Accountant,
    ControllerClaimEvent,
    PrivacyBudget,
    PrivacyParameterError,
    SampledWithRejectionGaussianEvent,
    event_from_dict,
)
from opu_hal.privacy.tuning import TruncatedNegativeBinomial
from tests.training_helpers import clusters
from trainers.cli.tune import parse_space, run_ledger, tune
from trainers.core.errors import TrainingConfigError
from trainers.run.config import TrainConfig
from trainers.run.loop import train

CONTROLLER = {"mode": "controller"}


def cfg(**kw) -> TrainConfig:
    base = dict(epochs=1, batch_size=40, hidden=(16, 12), seed=0, inputs="unit", delta=1e-5, features="pixels")
    base.update(kw)
    return TrainConfig.for_method("dp-ulr", **base)


def run(config: TrainConfig, lines: list[str] | None = None) -> dict:
    return train(
        config,
        data=clusters(n_train=600),
        progress=False,
        log=(lines.append if lines is not None else lambda message: None),
    )


def test_the_claim_event_is_theorem_3_5_as_a_claim_and_round_trips():
    claim = ControllerClaimEvent(0.05, 4.0, 20, 599)
    sound = SampledWithRejectionGaussianEvent(0.05, 4.0, 20, 599)
    assert not claim.is_guarantee and sound.is_guarantee and claim != sound
    assert claim.claim_source.startswith("paper 004")
    assert event_from_dict(json.loads(json.dumps(claim.to_dict()))) == claim
    ledger = Accountant("add_remove")
    ledger.step(claim, 30)
    restored = Accountant.from_json(ledger.to_json())
    assert restored.to_dict() == ledger.to_dict() and isinstance(restored.ledger[0].event, ControllerClaimEvent)
    assert restored.claims() == (claim.claim_source,)
    with pytest.raises(PrivacyParameterError, match="ControllerClaimEvent"):
        restored.get_epsilon(1e-5)
    with pytest.raises(PrivacyParameterError, match="published claim"):
        PrivacyBudget(5.0, 1e-5).allows(restored, claim)
    assert PrivacyBudget(5.0, 1e-5, claimed=True).allows(restored, claim)


def test_a_controller_run_records_a_claim_with_the_number_theorem_3_5_gives():
    lines: list[str] = []
    record = run(cfg(noise_multiplier=4.0, extra=CONTROLLER), lines)
    final = record["final"]
    assert "epsilon" not in final and "epsilon" not in record["epochs"][-1]
    assert final["claim"] == "claimed epsilon (paper 004, eq. 7 and Theorem 3.5, not a guarantee)"
    ledger = Accountant.from_dict(record["privacy"]["ledger"])
    assert {type(entry.event) for entry in ledger.ledger} == {ControllerClaimEvent}
    with pytest.raises(PrivacyParameterError, match="not a valid bound"):
        ledger.get_epsilon(1e-5)
    # The same steps charged as the parent event (what the ledger held before): the same number.
    before = Accountant("add_remove")
    for entry in ledger.ledger:
        e = entry.event
        before.step(
            SampledWithRejectionGaussianEvent(
                e.sampling_rate, e.noise_multiplier, e.min_batch_size, e.min_dataset_size
            ),
            entry.count,
        )
    assert final["claimed_epsilon"] == ledger.paper_claim_epsilon(1e-5) == before.get_epsilon(1e-5)
    assert record["epochs"][-1]["claimed_epsilon"] == final["claimed_epsilon"]
    assert any("claimed eps" in line and "(not a guarantee)" in line for line in lines if line.startswith("epoch"))
    assert record["privacy"]["guarantee"].startswith("none")


def test_a_controller_run_plans_and_stops_on_the_claimed_epsilon():
    lines: list[str] = []
    planned = run(cfg(target_epsilon=1.0, epochs=2, extra=CONTROLLER), lines)
    assert planned["final"]["claimed_epsilon"] <= 1.0 and not planned["privacy"]["stopped_by_budget"]
    assert any("plans claimed epsilon (paper 004" in line for line in lines)
    lines.clear()
    stopped = run(cfg(noise_multiplier=4.0, target_epsilon=0.5, epochs=3, extra=CONTROLLER), lines)
    assert stopped["privacy"]["stopped_by_budget"] and stopped["final"]["claimed_epsilon"] <= 0.5
    assert any("would exceed claimed epsilon (paper 004" in line for line in lines)


def test_the_gaussian_mode_still_records_a_guarantee():
    record = run(cfg(noise_multiplier=4.0, sampling="rejection"))
    ledger = Accountant.from_dict(record["privacy"]["ledger"])
    assert ledger.claims() == () and "claimed_epsilon" not in record["final"] and "claim" not in record["final"]
    assert {type(entry.event) for entry in ledger.ledger} == {SampledWithRejectionGaussianEvent}
    assert record["final"]["epsilon"] == ledger.get_epsilon(1e-5)


def test_tune_refuses_a_candidate_whose_ledger_holds_a_claim():
    ledger = Accountant("add_remove")
    ledger.step(ControllerClaimEvent(0.05, 4.0, 20, 599), 10)
    record = {"method": "dp-ulr", "privacy": {"ledger": ledger.to_dict()}, "final": {"delta": 1e-5}}
    with pytest.raises(TrainingConfigError, match="published claim .*paper 004"):
        run_ledger(record)
    with pytest.raises(TrainingConfigError, match="published claim"):
        tune(
            cfg(noise_multiplier=4.0, extra=CONTROLLER),
            parse_space(["lr=0.1"]),
            TruncatedNegativeBinomial.with_mean(2, 1.0),
            lambda config: record,
        )
