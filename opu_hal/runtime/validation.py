"""Checks of a value handed in from Python or the command line, shared by both: each refusal is a
typed error that names the argument and the allowed range, so a caller never meets a bare
``TypeError``, ``KeyError`` or ``ZeroDivisionError`` from inside the library.

``name`` is how the caller wrote the argument (``"batch_size"`` from Python, ``"--batch-size"``
from the command line); ``error`` is the :class:`OpuHalError` subclass of the layer that checks.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any

from ..contract.errors import OpuHalError, ParameterError

#: The most steps a run may plan: at a millisecond a step, about three hours; a run longer than
#: that is a mistake in its sizes (a public dataset size of 1e9 plans 2e7 steps), not a request.
MAX_PLANNED_STEPS = 10_000_000
#: The largest seed a run takes (numpy and torch seeds are 64-bit; 2^63 - 1 as the CLI's --seed).
MAX_SEED = 2**63 - 1

ErrorType = type[OpuHalError]


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def real(
    name: str,
    value: Any,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
    error: ErrorType = ParameterError,
) -> float:
    """``value`` as a finite float in the interval given; else ``error`` naming ``name`` and the interval."""
    interval = (
        f"{'(' if low_open else '['}{'-inf' if low is None else f'{low:g}'}, "
        f"{'inf' if high is None else f'{high:g}'}{')' if high_open or high is None else ']'}"
    )
    if not _is_real(value):
        raise error(f"{name} must be a finite number in {interval}, got {type(value).__name__} {value!r}")
    number = float(value)
    below = low is not None and (number <= low if low_open else number < low)
    above = high is not None and (number >= high if high_open else number > high)
    if not math.isfinite(number) or below or above:
        raise error(f"{name} must be a finite number in {interval}, got {value!r}")
    return number


def integer(name: str, value: Any, low: int, high: int | None = None, *, error: ErrorType = ParameterError) -> int:
    """``value`` as an int in ``[low, high]`` (a float, even ``64.0``, a bool or a string is refused:
    a count or a seed is an integer); else ``error`` naming ``name`` and the range."""
    interval = f"[{low}, {'inf' if high is None else high}]"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise error(f"{name} must be an integer in {interval}, got {type(value).__name__} {value!r}")
    number = int(value)
    if number < low or (high is not None and number > high):
        raise error(f"{name} must be an integer in {interval}, got {value!r}")
    return number


def choice(name: str, value: Any, allowed: Iterable[str], *, error: ErrorType = ParameterError) -> str:
    """``value`` if it is one of ``allowed`` (exactly, case included); else ``error`` listing them."""
    options = list(allowed)
    if not isinstance(value, str) or value not in options:
        raise error(f"{name} must be one of {', '.join(repr(o) for o in options)}, got {value!r}")
    return value


def planned_steps(steps: int, what: str, *, error: ErrorType = ParameterError) -> int:
    """Refuse a run that plans more than :data:`MAX_PLANNED_STEPS` steps, naming the number and its source."""
    if steps > MAX_PLANNED_STEPS:
        raise error(
            f"{what} plans {steps} steps, over the {MAX_PLANNED_STEPS} a run may plan (it would not finish in a "
            "plausible time); check the dataset size, batch size and epochs"
        )
    return steps
