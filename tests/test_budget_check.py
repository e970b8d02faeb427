"""The per-step budget check answers exactly as ``epsilon_after(...) <= target`` while counting
steps instead of converting RDP at every one, and charges nothing."""

from __future__ import annotations

import pytest

from opu_hal.privacy import Accountant, FixedSizeGaussianEvent, GaussianEvent, PoissonGaussianEvent, PrivacyBudget
from opu_hal.privacy.events import Event

DELTA = 1e-5


def exact(accountant: Accountant, event: Event, count: int, target: float) -> bool:
    return accountant.epsilon_after(event, count, DELTA) <= target


@pytest.mark.parametrize("target", [1.0, 1.3, 2.2])
def test_the_check_matches_the_exact_conversion_at_every_step_and_stops_at_the_same_one(target):
    accountant, event = Accountant(), PoissonGaussianEvent(0.01, 1.0)
    budget = PrivacyBudget(target, DELTA)
    steps = 0
    while True:
        for count in (0, 1, 2, 7):
            assert budget.allows(accountant, event, count) is exact(accountant, event, count, target)
        if not budget.allows(accountant, event):
            break
        accountant.step(event)
        steps += 1
    assert steps > 2 and accountant.get_epsilon(DELTA) <= target < accountant.epsilon_after(event, 1, DELTA)


def test_charging_another_event_or_restoring_a_ledger_is_seen_by_the_next_check():
    accountant, planned, other = Accountant(), PoissonGaussianEvent(0.05, 1.1), PoissonGaussianEvent(0.05, 0.6)
    budget = PrivacyBudget(2.0, DELTA)
    for step in range(400):
        if not budget.allows(accountant, planned):
            break
        assert budget.allows(accountant, planned, 3) is exact(accountant, planned, 3, 2.0)
        if step % 37 == 5 and budget.allows(accountant, other):
            accountant.step(other)  # the step's own event, now and then another than the planned one
        else:
            accountant.step(planned)
        if step == 60:
            accountant.load_state_dict(Accountant().state_dict())  # a fresh ledger: nothing spent
    assert accountant.epsilon_after(planned, 1, DELTA) > 2.0 >= accountant.get_epsilon(DELTA)


def test_the_check_converts_rdp_a_few_times_a_run_not_every_step(monkeypatch):
    accountant, event = Accountant("replace_one"), FixedSizeGaussianEvent(10_000, 100, 1.0)
    budget = PrivacyBudget(8.0, DELTA)
    conversions = 0
    convert = Accountant._epsilon_and_order

    def counted(self, *args):
        nonlocal conversions
        conversions += 1
        return convert(self, *args)

    monkeypatch.setattr(Accountant, "_epsilon_and_order", counted)
    ledger_before = accountant.to_dict()
    assert budget.allows(accountant, event) and accountant.to_dict() == ledger_before  # charges nothing
    for _ in range(500):
        assert budget.allows(accountant, event)
        accountant.step(event)
    assert conversions < 60  # bisection once (about 2 log2 of the steps left), then counting


def test_events_with_a_coupling_cost_are_converted_every_time(monkeypatch):
    class Coupled(GaussianEvent):  # the same curve, charged 1e-9 in delta per occurrence
        def total_variation(self) -> float:
            return 1e-9

    accountant, event = Accountant(), Coupled(2.0)
    budget = PrivacyBudget(1.5, DELTA)
    calls = []
    convert = Accountant.epsilon_after
    monkeypatch.setattr(Accountant, "epsilon_after", lambda self, *a, **k: calls.append(a) or convert(self, *a, **k))
    for _ in range(5):
        budget.allows(accountant, event)
        accountant.step(event)
    assert len(calls) == 5
