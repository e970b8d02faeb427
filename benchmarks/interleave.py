"""Interleaved timing: the baseline and every row, round-robin, repeated, each row's ratio to the
baseline taken within its round; the median ratio and its spread (min-max) over the rounds.

A second job that slows the machine during one round slows the baseline and the rows of that round
alike, so it moves one ratio of the ``rounds``, not the median (timing the baseline once, first,
let one busy epoch turn dp-sgd's 1.59x into 0.88x).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass

#: A row: called once per round, returns its seconds (per epoch, per step: the baseline's unit).
Timed = Callable[[], float]


@dataclass(frozen=True)
class Ratio:
    """A row's ratios to the baseline over the rounds: median and spread."""

    median: float
    low: float
    high: float
    seconds: float  # the row's median seconds

    def __str__(self) -> str:
        return f"{self.median:.2f}x [{self.low:.2f}-{self.high:.2f}]"


def interleaved_times(rows: Mapping[str, Timed], rounds: int, baseline: str) -> dict[str, list[float]]:
    """Seconds of every row in each of ``rounds`` rounds; each round runs every row once, the
    baseline first, the others in an order rotated from round to round (no row always runs after the
    same one)."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    if baseline not in rows:
        raise ValueError(f"the baseline {baseline!r} is not one of the rows {', '.join(rows)}")
    others = [name for name in rows if name != baseline]
    times: dict[str, list[float]] = {name: [] for name in rows}
    for r in range(rounds):
        times[baseline].append(rows[baseline]())
        shift = r % len(others) if others else 0
        for name in others[shift:] + others[:shift]:
            times[name].append(rows[name]())
    return times


def ratios(times: Mapping[str, list[float]], baseline: str) -> dict[str, Ratio]:
    """Each row's per-round ratio to the baseline of the same round, summarised (:class:`Ratio`)."""
    base = times[baseline]
    out = {}
    for name, seconds in times.items():
        per_round = [s / b for s, b in zip(seconds, base)]
        out[name] = Ratio(statistics.median(per_round), min(per_round), max(per_round), statistics.median(seconds))
    return out


def interleaved_ratios(rows: Mapping[str, Timed], rounds: int, baseline: str) -> dict[str, Ratio]:
    """:func:`interleaved_times` summarised by :func:`ratios`."""
    return ratios(interleaved_times(rows, rounds, baseline), baseline)
