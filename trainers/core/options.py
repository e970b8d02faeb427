"""Method-specific options (``--opt KEY=VALUE`` on the CLI, ``TrainConfig.extra`` in Python),
parsed against a small schema so every bad key or value is a :class:`TrainingConfigError`."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import TrainingConfigError


@dataclass(frozen=True)
class Option:
    """One option: its type, default, and a check with the allowed range in words."""

    kind: type
    default: Any
    check: Callable[[Any], bool] = lambda value: True
    allowed: str = ""
    choices: tuple[str, ...] = ()


def positive(default: float | None) -> Option:
    return Option(float, default, lambda v: math.isfinite(v) and v > 0, "a number > 0")


def count(default: int | None, low: int = 1) -> Option:
    return Option(int, default, lambda v: v >= low, f"an integer >= {low}")


def choice(default: str, *choices: str) -> Option:
    return Option(str, default, lambda v: v in choices, "one of " + ", ".join(choices), choices)


def parse_options(method: str, extra: dict[str, Any], schema: dict[str, Option]) -> dict[str, Any]:
    """Values for every key of ``schema`` from ``extra`` (defaults elsewhere); unknown keys refused."""
    unknown = sorted(set(extra) - set(schema))
    if unknown:
        raise TrainingConfigError(
            f"{method}: unknown --opt key(s) {', '.join(unknown)}; known: {', '.join(sorted(schema))}"
        )
    values: dict[str, Any] = {}
    for key, option in schema.items():
        raw = extra.get(key, option.default)
        if raw is None:
            values[key] = None
            continue
        try:
            value = option.kind(raw) if option.kind is not bool else str(raw).lower() in ("1", "true", "on", "yes")
        except (TypeError, ValueError):
            raise TrainingConfigError(
                f"{method}: --opt {key}={raw!r}: expected {option.allowed or option.kind.__name__}"
            ) from None
        if option.kind is not bool and not option.check(value):
            raise TrainingConfigError(f"{method}: --opt {key}={raw!r}: must be {option.allowed}")
        values[key] = value
    return values
