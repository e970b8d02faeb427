"""Inverse accounting: the smallest noise that keeps a planned run within a target budget."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from .accountant import Accountant
from .events import DEFAULT_ORDERS, Event, Neighboring, PrivacyParameterError

EventForNoise = Callable[[float], Event]


def planned_epsilon(
    event_for: EventForNoise,
    noise_multiplier: float,
    steps: int,
    delta: float,
    neighboring: Neighboring,
    orders: Sequence[float] = DEFAULT_ORDERS,
    *,
    claimed: bool = False,
    spent: Accountant | None = None,
) -> float:
    """Epsilon of ``steps`` occurrences of ``event_for(noise_multiplier)``, after what ``spent`` (a
    ledger already charged, e.g. a released feature mean) holds; ``claimed=True`` admits an event
    that is a published claim (its claimed epsilon, never a guarantee)."""
    accountant = spent.copy() if spent is not None else Accountant(neighboring, orders)
    accountant.step(event_for(noise_multiplier), steps)
    return accountant.paper_claim_epsilon(delta) if claimed else accountant.get_epsilon(delta)


def smallest_noise_multiplier(
    event_for: EventForNoise,
    steps: int,
    target_epsilon: float,
    delta: float,
    neighboring: Neighboring,
    *,
    low: float = 1e-2,
    high: float = 1e3,
    rtol: float = 1e-4,
    orders: Sequence[float] = DEFAULT_ORDERS,
    progress: Callable[[float, float], None] | None = None,
    claimed: bool = False,
    spent: Accountant | None = None,
) -> float:
    """Smallest noise multiplier ``z`` (within ``rtol``) whose planned run, after what the ledger
    ``spent`` already holds, has epsilon <= target.

    Bisection on ``log z``; epsilon falls as ``z`` grows. The returned ``z`` always satisfies the
    target (it is the upper end of the final bracket). ``progress(low, high)`` is called with the
    bracket after each halving (a long accounting shows it on stderr). ``claimed=True``: the target
    is on a published claim's epsilon (:func:`planned_epsilon`).
    """
    if not (math.isfinite(target_epsilon) and target_epsilon > 0 and 0 < delta < 1 and steps >= 1):
        raise PrivacyParameterError(
            f"need a finite target_epsilon > 0, 0 < delta < 1, steps >= 1; got {target_epsilon}, {delta}, {steps}"
        )

    def fits(z: float) -> bool:
        try:
            return (
                planned_epsilon(event_for, z, steps, delta, neighboring, orders, claimed=claimed, spent=spent)
                <= target_epsilon
            )
        except PrivacyParameterError:
            return False

    if not fits(high):
        raise PrivacyParameterError(
            f"even noise multiplier {high:g} does not reach epsilon {target_epsilon} in {steps} steps"
        )
    if fits(low):
        return low
    return bisect_log(fits, low, high, rtol, progress)


def bisect_log(
    fits: Callable[[float], bool],
    low: float,
    high: float,
    rtol: float = 1e-4,
    progress: Callable[[float, float], None] | None = None,
) -> float:
    """The upper end of a bracket ``[low, high]`` (``fits(low)`` false, ``fits(high)`` true, ``fits``
    monotone) narrowed on ``log z`` until ``high / low <= 1 + rtol``; ``progress(low, high)`` after
    each halving. The returned value always fits."""
    while high / low > 1 + rtol:
        middle = math.sqrt(low * high)
        if fits(middle):
            high = middle
        else:
            low = middle
        if progress is not None:
            progress(low, high)
    return high


def noise_std_for(noise_multiplier: float, sensitivity: float) -> float:
    """Device noise std (output units) that gives ``noise_multiplier`` at ``sensitivity``."""
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise PrivacyParameterError(f"sensitivity must be finite and > 0, got {sensitivity}")
    return noise_multiplier * sensitivity
