"""A run that ends at chance learned nothing: say so, with what to change, instead of a bare number."""

from __future__ import annotations

import warnings

#: How far above ``1 / classes`` a test accuracy must be to count as learning (absolute).
CHANCE_MARGIN = 0.02


class ChanceAccuracyWarning(UserWarning):
    """The run's final test accuracy is within :data:`CHANCE_MARGIN` of guessing."""


def chance_note(accuracy: float | None, n_classes: int, method: str, private: bool) -> str | None:
    """The warning for a final test ``accuracy`` at chance (``<= 1/C + margin``), else ``None``."""
    if accuracy is None or accuracy != accuracy or n_classes < 2:  # none, or NaN
        return None
    chance = 1.0 / n_classes
    if accuracy > chance + CHANCE_MARGIN:
        return None
    advice = "--lr, --batch-size, --epochs" + (", the clip (--clip-norm / --tau-e) and epsilon" if private else "")
    return (
        f"{method}: test accuracy {accuracy:.4f} is at or below chance (1/{n_classes} = {chance:.4f}): the run learned "
        f"nothing; check {advice} (the method's defaults: TrainConfig.for_method({method!r}))"
    )


def warn_if_chance(accuracy: float | None, n_classes: int, method: str, private: bool) -> str | None:
    """Issue :class:`ChanceAccuracyWarning` for a run at chance; returns its text (or ``None``)."""
    note = chance_note(accuracy, n_classes, method, private)
    if note is not None:
        warnings.warn(note, ChanceAccuracyWarning, stacklevel=3)
    return note
