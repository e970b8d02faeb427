"""The wrapped optimizer: ``step()`` replaces whatever ``.grad`` holds by the noisy release of the
clipped update, charges the accountant, then lets the user's optimizer apply it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from opu_hal.privacy import Accountant, Event, PrivacyBudget
from opu_hal.privacy.mechanisms import DigitizedRelease, GaussianRelease, SkellamRelease

from ..core.errors import NonFiniteError, TrainingConfigError
from .class_updates import NamedDFAClipping
from .updates import DFAClipping, PerExampleClipping

#: The clipped updates ``make_private`` wraps (per method and model kind).
PrivateUpdate = PerExampleClipping | DFAClipping | NamedDFAClipping
#: Called with the number of examples behind the update before it is released; raises to refuse.
BatchGuard = Callable[[int], None]


def examples_of(update: PrivateUpdate) -> int:
    """The per-example rows behind the recorded update (after ``clipped()`` found it)."""
    if isinstance(update, (DFAClipping, NamedDFAClipping)):
        return int(update.pending[0].shape[0]) if update.pending is not None else 0
    return next((int(a.shape[0]) for a, _ in update.records.values() if a is not None), 0)


class PrivacyBudgetExhausted(TrainingConfigError):
    """The next step would cross the engine's target epsilon; nothing was applied."""


class DPOptimizer:
    """Wraps ``optimizer``; ``noise_std`` is the std of the noise on the released clipped quantity
    (``z * sensitivity``: ``z C`` for dp-sgd's sum, as Opacus; ``z Delta`` on dp-dfa's average)."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        update: PrivateUpdate,
        mechanism: GaussianRelease | SkellamRelease | DigitizedRelease,
        event: Event,
        accountant: Accountant,
        budget: PrivacyBudget | None,
        batch_guard: BatchGuard | None = None,
    ) -> None:
        self.original_optimizer = optimizer
        self.batch_guard = batch_guard
        self.update = update
        self.mechanism = mechanism
        self.event = event
        self.accountant = accountant
        self.budget = budget

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return self.original_optimizer.param_groups

    @property
    def noise_std(self) -> float:
        return self.mechanism.noise_std

    def allows_next_step(self) -> bool:
        return self.budget is None or self.budget.allows(self.accountant, self.event)

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.original_optimizer.zero_grad(set_to_none=set_to_none)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Release ``clip(update) + noise`` into ``.grad``, account for it, apply it."""
        if closure is not None:
            with torch.enable_grad():
                closure()
        if not self.allows_next_step():
            budget = self.budget  # not None: allows_next_step() is true without a budget
            limit = f"epsilon {budget.target_epsilon} at delta {budget.delta}" if budget is not None else "the budget"
            raise PrivacyBudgetExhausted(f"the next step would exceed {limit}")
        with torch.no_grad():
            clipped = self.update.clipped()
            if self.batch_guard is not None:
                self.batch_guard(examples_of(self.update))
            if not bool(torch.isfinite(clipped).all()):
                raise NonFiniteError(
                    "optimizer.step(): the clipped update holds NaN or infinity (non-finite data, loss or "
                    "weights); nothing was released or charged"
                )
            released = self.update.released_to_grad(self.mechanism.release(clipped))
            params = self.update.params
            for p, part in zip(params, released.split([p.numel() for p in params])):
                p.grad = part.view_as(p).to(p.device, p.dtype)  # disjoint views of the release, as the loop's
        if isinstance(self.update, (DFAClipping, NamedDFAClipping)):
            self.update.pending = None
        self.accountant.step(self.event)
        return self.original_optimizer.step()

    def state_dict(self) -> dict[str, Any]:
        return self.original_optimizer.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.original_optimizer.load_state_dict(state)
