"""A described training run (dataset size, batch, steps, sampling) as the accountant sees it: the
event per noise multiplier, the neighbouring relation and the number of steps. Shared by the
``account`` / ``plan`` commands and calibration's operating-point planner."""

from __future__ import annotations

import argparse
import math
from typing import Callable

from .events import (
    Event,
    FixedSizeGaussianEvent,
    Neighboring,
    PoissonGaussianEvent,
    PrivacyParameterError,
    SampledWithRejectionGaussianEvent,
)

SAMPLINGS = ("poisson", "fixed", "rejection")
MAX_STEPS = 10**8


RELATION_WORDS = {"add_remove": "add/remove-one (e.g. C for a sum clipped to C)",
                  "replace_one": "replace-one (e.g. 2C for a sum clipped to C)"}


def run_description(args: argparse.Namespace) -> tuple[Callable[[float], Event], Neighboring, int]:
    """(event for a noise multiplier, neighbouring relation, steps) of the described run."""
    n, m = args.dataset_size, args.batch_size
    if not (n >= 2 and 1 <= m <= n):
        raise PrivacyParameterError(f"need 1 <= --batch-size <= --dataset-size and --dataset-size >= 2, got {m} and {n}")
    q = m / n
    if args.steps is not None:
        steps = args.steps
    else:
        if not (math.isfinite(args.epochs) and 0 < args.epochs <= MAX_STEPS * m / n):
            raise PrivacyParameterError(f"--epochs must be finite, > 0 and give at most {MAX_STEPS:g} steps, got {args.epochs}")
        steps = math.ceil(args.epochs * n / m)
    if not 1 <= steps <= MAX_STEPS:
        raise PrivacyParameterError(f"--steps must be in [1, {MAX_STEPS:g}], got {steps}")
    if args.sampling == "poisson":
        return (lambda z: PoissonGaussianEvent(q, z)), "add_remove", steps
    if args.sampling == "fixed":
        return (lambda z: FixedSizeGaussianEvent(n, m, z)), "replace_one", steps
    min_batch = args.min_batch if args.min_batch is not None else max(1, int(0.9 * m))
    # Theorem B.1 needs N-bar at most the smaller neighbour: n - 1 under add/remove.
    return (lambda z: SampledWithRejectionGaussianEvent(q, z, min_batch, n - 1)), "add_remove", steps
