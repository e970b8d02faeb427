"""A described training run as the accountant sees it: :class:`RunShape` (dataset size, batch,
steps, sampling, sensitivity; the lattice mechanism's dimension and resolution), and from it the
event per noise multiplier, the neighbouring relation and the number of steps.

Shared by the ``account`` / ``plan`` commands, calibration's operating-point planner and the
Python API. Errors name quantities (``batch_size``, ``epochs``), never command-line flags: the
command line maps them to its flags (:func:`as_flags`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from .events import (
    Event,
    FixedSizeGaussianEvent,
    Neighboring,
    PoissonGaussianEvent,
    PrivacyParameterError,
)
from .paper_events import SampledWithRejectionGaussianEvent

SAMPLINGS = ("poisson", "fixed", "rejection")
MAX_STEPS = 10**8
Sampling = Literal["poisson", "fixed", "rejection"]

RELATION_WORDS = {
    "add_remove": "add/remove-one (e.g. C for a sum clipped to C)",
    "replace_one": "replace-one (e.g. 2C for a sum clipped to C)",
}


def steps_for(dataset_size: int, batch_size: int, *, epochs: float | None = None, steps: int | None = None) -> int:
    """Steps of a run of ``epochs`` passes (``ceil(epochs N / m)``) or exactly ``steps``."""
    n, m = dataset_size, batch_size
    if not (n >= 2 and 1 <= m <= n):
        raise PrivacyParameterError(f"need 1 <= batch_size <= dataset_size and dataset_size >= 2, got {m} and {n}")
    if steps is None:
        if epochs is None or not (math.isfinite(epochs) and 0 < epochs <= MAX_STEPS * m / n):
            raise PrivacyParameterError(
                f"epochs must be finite, > 0 and give at most {MAX_STEPS:g} steps, got {epochs}"
            )
        steps = math.ceil(epochs * n / m)
    if not 1 <= steps <= MAX_STEPS:
        raise PrivacyParameterError(f"steps must be in [1, {MAX_STEPS:g}], got {steps}")
    return steps


@dataclass(frozen=True)
class RunShape:
    """The described training run. ``sensitivity`` is in output units; the Skellam planner also
    receives ``sensitivity_e``, the same in electrons (lattice units) at the operating point.
    ``min_batch``: the rejection sampler's smallest accepted batch (default 90 % of ``batch_size``)."""

    sampling: Sampling
    dataset_size: int
    batch_size: int
    steps: int
    sensitivity: float = 1.0
    passes: int = 1
    sensitivity_e: float | None = None
    dimension: int | None = None  # lattice Skellam mechanism: the update's coordinates d
    lattice_resolution: float | None = None  # ... and its resolution k
    rounding_analysis: str | None = None  # ... and how its rounding is accounted (opu_hal.privacy.rounding)
    min_batch: int | None = None

    def __post_init__(self) -> None:
        if self.sampling not in SAMPLINGS:
            raise PrivacyParameterError(f"sampling {self.sampling!r}; allowed: {', '.join(SAMPLINGS)}")
        steps_for(self.dataset_size, self.batch_size, steps=self.steps)


def run_description(shape: RunShape) -> tuple[Callable[[float], Event], Neighboring, int]:
    """(event for a noise multiplier, neighbouring relation, steps) of the described run."""
    n, m = shape.dataset_size, shape.batch_size
    q = m / n
    if shape.sampling == "poisson":
        return (lambda z: PoissonGaussianEvent(q, z)), "add_remove", shape.steps
    if shape.sampling == "fixed":
        return (lambda z: FixedSizeGaussianEvent(n, m, z)), "replace_one", shape.steps
    min_batch = shape.min_batch if shape.min_batch is not None else max(1, int(0.9 * m))
    # Theorem B.1 needs N-bar at most the smaller neighbour: n - 1 under add/remove.
    return (lambda z: SampledWithRejectionGaussianEvent(q, z, min_batch, n - 1)), "add_remove", shape.steps


#: Quantities an error may name, as identifiers (``batch_size``) or, for the plain words, as the
#: subject of a requirement (``epochs must``, ``steps in [``, ``delta =``).
_IDENTIFIERS = ("dataset_size", "batch_size", "min_batch", "noise_multiplier", "lattice_resolution", "target_epsilon")
_WORDS = ("epochs", "steps", "sensitivity", "dimension", "delta")


def as_flags(message: str) -> str:
    """``message`` with the quantities it names written as the command line's flags."""
    flag = lambda m: "--" + m.group(1).replace("_", "-")  # noqa: E731
    message = re.sub(r"\b(" + "|".join(_IDENTIFIERS) + r")\b", flag, message)
    return re.sub(r"(?<![-\w])(" + "|".join(_WORDS) + r")\b(?= must| in \[| =| >| <)", flag, message)
