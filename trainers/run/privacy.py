"""Glue between private methods and the accountant: choosing the noise for a target budget."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from opu_hal.privacy import Accountant, PrivacyParameterError, planned_epsilon, smallest_noise_multiplier

from ..core.errors import TrainingConfigError
from ..methods.base import GaussianNoiseMethod, Method
from .config import TrainConfig

#: A plan that spends less than this share of the target says so, with the reason (issue 35).
SHORTFALL = 0.95


def plan_noise(
    method: Method, steps: int, config: TrainConfig, log: Callable[[str], None], spent: Accountant | None = None
) -> None:
    """Give ``method`` the smallest noise multiplier whose planned run, after what the ledger
    ``spent`` already holds (a released feature mean), fits the target (inverse accounting), unless
    the user fixed ``--noise-multiplier``. The log states the epsilon the plan
    actually spends, and why, when the event's valid range floors the noise above what the target
    needs (e.g. Theorem 3.5's ``sigma_0 >= 4``): the run then cannot spend its target."""
    if not (
        isinstance(method, GaussianNoiseMethod)
        or (hasattr(method, "event_for") and hasattr(method, "set_noise_multiplier"))
    ):
        return  # no noise to choose (photonic-dp's is the device's)
    if config.noise_multiplier is not None:
        method.set_noise_multiplier(config.noise_multiplier)
        return
    if config.target_epsilon is None:  # TrainConfig.validate refuses this for such methods
        raise AssertionError(f"{method.name}: neither --noise-multiplier nor --target-epsilon")
    extra_steps, fixed = method.preparation_charge()  # DP-MAC's pre-training and histograms
    if extra_steps or fixed:
        spent = spent.copy() if spent is not None else Accountant(method.neighboring, conversion=config.accounting)
        for event in fixed:
            spent.step(event)
        steps += extra_steps
    event_for = method.event_for
    claimed = method.claim is not None  # a published claim: the target is on the claimed epsilon
    what = f"claimed epsilon ({method.claim}, not a guarantee)" if claimed else "epsilon"
    reporting = os.environ.get("RANK", "0") == "0"  # a torchrun job: rank 0 speaks for every process
    if reporting:
        print(
            f"{method.name}: choosing the noise multiplier for {what} {config.target_epsilon} at delta {config.delta} "
            f"over {steps} steps (inverse accounting)...",
            file=sys.stderr,
            flush=True,
        )
    live = reporting and sys.stderr.isatty()

    def progress(low: float, high: float) -> None:  # public numbers only: the settings' noise multiplier
        if live:
            print(f"\r  noise multiplier in [{low:.5g}, {high:.5g}]", end="", file=sys.stderr, flush=True)

    z = smallest_noise_multiplier(
        event_for,
        steps,
        config.target_epsilon,
        config.delta,
        method.neighboring,
        progress=progress,
        claimed=claimed,
        spent=spent,
    )
    if live:
        print(file=sys.stderr, flush=True)
    method.set_noise_multiplier(z)
    planned = planned_epsilon(event_for, z, steps, config.delta, method.neighboring, claimed=claimed, spent=spent)
    log(
        f"{method.name}: noise multiplier {z:.4f} plans {what} {planned:.4g} (target {config.target_epsilon}) "
        f"at delta {config.delta} after the planned {steps} steps"
    )
    if planned < SHORTFALL * config.target_epsilon:
        log(
            f"{method.name}: the plan spends only {planned:.3g} of {what} {config.target_epsilon}: "
            f"{floor_reason(event_for, z)}"
        )


def check_accounting(
    accountant: Accountant, event_for: Callable[[float], Any] | None, option: str = "--accounting pld"
) -> None:
    """Refuse a PLD conversion for a run whose events (``event_for(z)``; ``None``: chosen at run
    time) dp-accounting's PLD does not cover, before any noise is planned or drawn (the planner
    would otherwise find no noise that fits). ``option`` names the setting in the error."""
    if accountant.conversion != "pld":
        return
    try:
        if event_for is None:
            raise PrivacyParameterError("the method charges events chosen at run time")
        accountant.curve(event_for(1.0))
    except PrivacyParameterError as error:
        raise TrainingConfigError(f"{option}: {error}") from None


def floor_reason(event_for: Callable[[float], object], z: float) -> str:
    """Why no smaller noise multiplier than ``z`` was planned: the event's refusal just below it."""
    try:
        event_for(z * (1 - 1e-3))
    except PrivacyParameterError as error:
        return f"the accounting refuses a smaller noise multiplier ({error})"
    return "a smaller noise multiplier exceeds the target or is refused at every order of the grid"


def spent_epsilon(accountant: Accountant, delta: float, claim: str | None) -> dict[str, Any]:
    """The epsilon a run publishes: ``{"epsilon": ...}`` for a guarantee; for a ledger charged with a
    published claim (``claim``, the method's), ``{"claimed_epsilon": ...}`` (never a guarantee)."""
    if claim is None:
        return {"epsilon": accountant.get_epsilon(delta)}  # refuses a ledger holding a claim
    return {"claimed_epsilon": accountant.paper_claim_epsilon(delta)}


def claim_statement(claim: str) -> str:
    """How a record and a log name a claimed epsilon."""
    return f"claimed epsilon ({claim}, not a guarantee)"
