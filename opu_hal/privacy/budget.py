"""A privacy budget: answers whether the next step still fits, so training stops before crossing."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .accountant import Accountant
from .events import Event, PrivacyParameterError, is_real


@dataclass(frozen=True)
class PrivacyBudget:
    """Target ``(epsilon, delta)``; :meth:`allows` is checked before each step."""

    target_epsilon: float
    delta: float
    #: True for a run that reports a published claim (not a guarantee): the target is the claimed epsilon.
    claimed: bool = False

    def __post_init__(self) -> None:
        if not (is_real(self.target_epsilon) and math.isfinite(self.target_epsilon) and self.target_epsilon > 0):
            raise PrivacyParameterError(f"target_epsilon must be a finite number > 0, got {self.target_epsilon!r}")
        if not (is_real(self.delta) and 0 < self.delta < 1):
            raise PrivacyParameterError(f"delta must be in (0, 1), got {self.delta}")

    def allows(self, accountant: Accountant, event: Event, count: int = 1) -> bool:
        """Whether ``count`` more ``event`` keep the composition within the target."""
        return accountant.fits(
            event,
            count,
            self.delta,
            self.target_epsilon,  # == epsilon_after(...) <= target
            claimed=self.claimed,
        )

    def spent(self, accountant: Accountant) -> float:
        """Epsilon spent so far at this budget's delta (the claimed one for a budget on a claim)."""
        return accountant.paper_claim_epsilon(self.delta) if self.claimed else accountant.get_epsilon(self.delta)
