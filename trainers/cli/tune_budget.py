"""The budget of ``opu-hal tune``: the law of the number of candidates ``K`` (``--k-distribution``),
the share of delta its truncation takes, and ``--total-epsilon``'s planning of each run's noise so
that the tuning and the final run together fit (Papernot and Steinke 2022, Theorems 2 and 6)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from opu_hal.privacy import Accountant
from opu_hal.privacy.inverse import bisect_log
from opu_hal.privacy.tuning import FixedRuns, PoissonRuns, RunsLaw, TruncatedNegativeBinomial, tuning_epsilon

from ..core.errors import TrainingConfigError
from ..run.config import TrainConfig

#: The share of ``--delta`` that pays for conditioning ``K`` on ``K <= slots`` (:func:`conversion_delta`).
TRUNCATION_SHARE = 0.1


def total_epsilon_at(
    event_for: Callable[[float], Any],
    steps: int,
    neighboring: str,
    law: RunsLaw,
    z: float,
    delta: float,
    spent: Accountant | None = None,
    final_run: bool = True,
) -> float:
    """The epsilon of the tuning (``law``'s theorem) plus the final run (without it when
    ``final_run`` is false: ``--release best-candidate``), each run the events of ``spent`` (charged
    before its steps: a released feature mean) and ``steps`` events ``event_for(z)``: what the tuning
    record's ``total_epsilon`` will say for runs at ``z``."""
    per_run = spent.copy() if spent is not None else Accountant(neighboring)  # type: ignore[arg-type]
    per_run.step(event_for(z), steps)
    rdp = per_run.rdp
    total = law.tuning_rdp(per_run.orders, rdp) + (rdp if final_run else 0.0)
    return tuning_epsilon(per_run.orders, total, delta)[0]


def noise_for_total(
    base: TrainConfig,
    law: RunsLaw,
    total: float,
    rtol: float = 1e-4,
    data: Any = None,
    final_run: bool = True,
) -> TrainConfig:
    """``base`` with the smallest noise multiplier (to ``rtol``) whose tuning and final run (the tuning
    alone when ``final_run`` is false) spend at most ``total`` at ``base.delta`` (``--total-epsilon``;
    the conversion gets :func:`conversion_delta`): the run's event and step count come from a
    trainer planned at ``total`` (a lower bound on the noise), then bisection on ``log z``."""
    from ..run.loop import Trainer  # torch-heavy: only when planning

    if not (math.isfinite(total) and total > 0):
        raise TrainingConfigError(f"--total-epsilon must be > 0, got {total}")
    planning = replace(base, target_epsilon=total, noise_multiplier=None)
    with Trainer(planning, data=data, progress=False, log=lambda message: None) as trainer:
        method, steps, spent = trainer.method, trainer.planned_steps, trainer.accountant
        low = float(method.noise_multiplier)  # type: ignore[attr-defined]
        event_for = method.event_for  # type: ignore[attr-defined]

    def fits(z: float) -> bool:
        return (
            total_epsilon_at(
                event_for, steps, method.neighboring, law, z, conversion_delta(law, base.delta), spent, final_run
            )
            <= total
        )

    high = low * 2
    while not fits(high):
        low, high = high, high * 2
        if high > 1e4:
            raise TrainingConfigError(f"--total-epsilon {total}: no noise multiplier up to 1e4 fits the tuning")
    return replace(base, target_epsilon=None, noise_multiplier=bisect_log(fits, low, high, rtol))


def runs_law(distribution: str, mean: float, eta: float) -> RunsLaw:
    """The law of ``K`` named by ``--k-distribution`` with mean ``--mean-runs`` (``--eta``: the truncated
    negative binomial's shape)."""
    if distribution == "poisson":
        return PoissonRuns(mean)
    if distribution == "negative-binomial":
        return TruncatedNegativeBinomial.with_mean(mean, eta)
    if distribution == "fixed":
        if not (math.isfinite(mean) and mean == int(mean) and 1 <= mean <= 1000):
            raise TrainingConfigError(
                f"--mean-runs {mean!r}: with --k-distribution fixed, the number of candidates "
                "must be an integer in [1, 1000]"
            )
        return FixedRuns(int(mean))
    raise TrainingConfigError(f"--k-distribution {distribution!r}: choose negative-binomial, poisson or fixed")


def conversion_delta(law: RunsLaw, delta: float) -> float:
    """The part of ``--delta`` the RDP conversion gets: all of it when ``K`` is fixed (nothing is
    truncated), else ``1 - TRUNCATION_SHARE`` of it; the rest pays for truncating ``K`` to the slots."""
    return delta if isinstance(law, FixedRuns) else (1 - TRUNCATION_SHARE) * delta
