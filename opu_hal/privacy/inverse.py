"""Inverse accounting: the smallest noise that keeps a planned run within a target budget."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from .accountant import Accountant
from .events import DEFAULT_ORDERS, Event, Neighboring, PrivacyParameterError
from .root_search import narrow_bracket

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

    A bracket found by stepping from ``z = 1`` (:func:`expand_bracket`), then narrowed on ``log z``
    (:func:`~.root_search.narrow_bracket`: bisection's contract in fewer evaluations); epsilon falls
    as ``z`` grows. With RDP conversion the search runs first on the orders up to
    :data:`QUICK_MAX_ORDER` (an epsilon never below the full one) and its answer is kept only when
    every order confirms it (it fits, and ``z / (1 + rtol)`` does not); else the search runs on all
    the orders from there. The returned ``z`` always satisfies the
    target (it is the upper end of the final bracket). ``progress(low, high)`` is called with the
    bracket after each step (a long accounting shows it on stderr). ``claimed=True``: the target
    is on a published claim's epsilon (:func:`planned_epsilon`).
    """
    if not (math.isfinite(target_epsilon) and target_epsilon > 0 and 0 < delta < 1 and steps >= 1):
        raise PrivacyParameterError(
            f"need a finite target_epsilon > 0, 0 < delta < 1, steps >= 1; got {target_epsilon}, {delta}, {steps}"
        )

    full = _epsilon_function(event_for, steps, delta, neighboring, orders, claimed, spent)
    quick = None if claimed else _quick_epsilon_function(event_for, steps, delta, neighboring, orders, spent)
    start = BRACKET_START
    if quick is not None:  # a first answer on the low orders, kept when all the orders confirm it
        z = _search(quick, target_epsilon, low, high, rtol, progress, start)
        if z is not None and full(z) <= target_epsilon and (z == low or full(z / (1 + rtol)) > target_epsilon):
            return z
        start = z if z is not None else start
    z = _search(full, target_epsilon, low, high, rtol, progress, start)
    if z is None:
        raise PrivacyParameterError(
            f"even noise multiplier {high:g} does not reach epsilon {target_epsilon} in {steps} steps"
        )
    return z


#: The search first runs on the orders up to this one (dp-accounting's sampled-without-replacement
#: Gaussian takes time quadratic in the order: the orders above make up most of an evaluation).
QUICK_MAX_ORDER = 32.0


def _epsilon_function(
    event_for: EventForNoise,
    steps: int,
    delta: float,
    neighboring: Neighboring,
    orders: Sequence[float],
    claimed: bool,
    spent: Accountant | None,
) -> Callable[[float], float]:
    """``z -> planned_epsilon(...)`` (``inf`` where the event refuses ``z``), memoized."""
    evaluated: dict[float, float] = {}

    def epsilon_at(z: float) -> float:
        if z not in evaluated:
            try:
                evaluated[z] = planned_epsilon(
                    event_for, z, steps, delta, neighboring, orders, claimed=claimed, spent=spent
                )
            except PrivacyParameterError:
                evaluated[z] = math.inf
        return evaluated[z]

    return epsilon_at


def _quick_epsilon_function(
    event_for: EventForNoise,
    steps: int,
    delta: float,
    neighboring: Neighboring,
    orders: Sequence[float],
    spent: Accountant | None,
) -> Callable[[float], float] | None:
    """The planned epsilon on the orders up to :data:`QUICK_MAX_ORDER` (never below the epsilon on all
    of them: a minimum over fewer orders), with ``spent``'s ledger replayed; None where that would
    not save work or not hold (PLD conversion, whose grid depends on the orders)."""
    every = [float(o) for o in (spent.orders if spent is not None else orders)]
    few = [o for o in every if o <= QUICK_MAX_ORDER]
    if not few or len(few) == len(every) or (spent is not None and spent.conversion != "rdp"):
        return None
    quick_spent = None
    if spent is not None:
        quick_spent = Accountant(spent.neighboring, few, spent.conversion)
        for entry in spent.ledger:
            quick_spent.step(entry.event, entry.count)
    return _epsilon_function(event_for, steps, delta, neighboring, few, False, quick_spent)


def _search(
    epsilon_at: Callable[[float], float],
    target: float,
    low: float,
    high: float,
    rtol: float,
    progress: Callable[[float, float], None] | None,
    start: float,
) -> float | None:
    """The smallest fitting ``z`` within ``rtol`` (:func:`expand_bracket` from ``start``, then
    :func:`~.root_search.narrow_bracket`); None when even ``high`` does not fit."""
    bracket = expand_bracket(lambda z: epsilon_at(z) <= target, low, high, start)
    if bracket is None:
        return None
    if bracket[1] == low:
        return low
    return narrow_bracket(epsilon_at, target, bracket[0], bracket[1], rtol, progress)


#: Where :func:`expand_bracket` starts, and the factor it steps by.
BRACKET_START, BRACKET_FACTOR = 1.0, 4.0


def expand_bracket(
    fits: Callable[[float], bool], low: float, high: float, start: float = BRACKET_START
) -> tuple[float, float] | None:
    """A bracket ``(a, b)`` within ``[low, high]`` with ``fits(b)`` true and ``fits(a)`` false (or ``b ==
    low``), stepping by :data:`BRACKET_FACTOR` from ``start``; None when even ``fits(high)`` is false.
    Starting near the answer keeps the accounting away from extreme noise levels, whose events can take
    far longer to evaluate (a Skellam mean of 1e8)."""
    z = min(max(start, low), high)
    if fits(z):
        while z > low:
            smaller = max(z / BRACKET_FACTOR, low)
            if not fits(smaller):
                return smaller, z
            z = smaller
        return low, low
    while z < high:
        larger = min(z * BRACKET_FACTOR, high)
        if fits(larger):
            return z, larger
        z = larger
    return None


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
