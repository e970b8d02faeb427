"""The mechanism inspector: a white-box check of what a private run's code DOES, mechanism by
mechanism, held against what its ledger CHARGES (issue 44, item 3). The statistical audit
(:mod:`.white_box`, :mod:`.black_box`) bounds epsilon from canaries and cannot see a bug whose
effect stays under its canaries' power (noise of the right variance and the wrong law, a 2x noise
shortfall at a few steps, a sampler that ignores its rate); the inspector drives the real code
paths with controlled inputs and measures each quantity the accountant relies on:

- per-step noise (:mod:`.noise_probes`): a zero update released ``steps`` times (empty batches for
  dp-mac / dp-ulr): its std (one-sided chi-square against the charged std), its law
  (Kolmogorov-Smirnov against the accounted Gaussian, plus the share of distinct values; device
  counts: on the integer lattice and chi-square against Skellam), independence across steps and
  coordinates (Fisher-z correlation tests), and its std per unit of the larger of the measured and
  declared sensitivity against the event's noise multiplier;
- sensitivity (:func:`.sensitivity.measure_sensitivity`): the largest change one example makes to
  the pre-noise update, against the declared one;
- the sampler (:mod:`.sampler_check`): the run's own sampler drawn ``sampler_steps`` times against
  the rate the ledger charges (per-example binomial counts, co-inclusion, step-to-step dependence);
- the centring release, a second run's noise (replay from ``--seed``), and the number of noise
  values a real epoch draws per charged step (:mod:`.release_checks`).

Every statistical row is tested at ``alpha / (number of statistical rows)`` (Bonferroni), so a sound
run is flagged with probability at most ``alpha``; rule rows (sensitivity, lattice, distinct
values, draw counts) are deterministic.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..core.data import Dataset
from ..methods import METHODS
from ..run.config import TrainConfig
from ..run.loop import Trainer
from .noise_checks import (
    Finding,
    continuity,
    gaussian_fit,
    independence,
    on_integer_lattice,
    skellam_fit,
    variance_shortfall,
)
from .noise_probes import NoiseProbe, probe_noise
from .release_checks import check_centering, count_noise_draws, replay_finding
from .sampler_check import check_sampler
from .sensitivity import measure_sensitivity

#: Family-wise false-alarm rate of one inspection (sound runs are flagged at most this often).
DEFAULT_ALPHA = 1e-3


@dataclass
class InspectionRow:
    """One line of the report: mechanism, quantity, measured vs charged, and the verdict."""

    mechanism: str
    quantity: str
    measured: float
    charged: float
    test: str
    p_value: float | None
    flagged: bool


@dataclass
class InspectionReport:
    """What :func:`inspect` measured: one row per (mechanism, quantity), and what it did not cover."""

    method: str
    noise_source: str
    alpha: float
    per_test_level: float
    rows: list[InspectionRow]
    not_inspected: list[str] = field(default_factory=list)
    time_s: float = 0.0

    @property
    def flagged(self) -> bool:
        return any(row.flagged for row in self.rows)

    @property
    def findings(self) -> list[InspectionRow]:
        return [row for row in self.rows if row.flagged]

    def to_dict(self) -> dict[str, Any]:
        """The JSON record form (``flagged`` and ``findings`` included)."""
        return {
            **asdict(self),
            "flagged": self.flagged,
            "findings": [
                f"{r.mechanism}: {r.quantity} measured {r.measured:.4g}, charged {r.charged:.4g}" for r in self.findings
            ],
        }

    def table(self) -> str:
        """A plain-text table: mechanism, quantity, measured, charged, p-value, verdict."""
        lines = [f"{'mechanism':42} {'quantity':58} {'measured':>11} {'charged':>11} {'p-value':>9}  verdict"]
        for r in self.rows:
            p = "rule" if r.p_value is None else f"{r.p_value:.2g}"
            lines.append(
                f"{r.mechanism[:42]:42} {r.quantity[:58]:58} {r.measured:11.4g} {r.charged:11.4g} "
                f"{p:>9}  {'FLAGGED' if r.flagged else 'ok'}"
            )
        return "\n".join(lines)


def noise_findings(probe: NoiseProbe, sensitivity: dict[str, Any] | None) -> list[Finding]:
    """The per-step noise rows of one probe (module docstring)."""
    name, draws = probe.mechanism, probe.draws
    rows = [variance_shortfall(name, draws, probe.charged_std)]
    if probe.law == "gaussian":
        rows += [gaussian_fit(name, draws, probe.charged_std), continuity(name, draws)]
    else:
        rows.append(on_integer_lattice(name, draws))
        if probe.law == "skellam":
            rows.append(skellam_fit(name, draws))
    rows += independence(name, draws)
    if probe.charged_multiplier is not None and sensitivity is not None:
        delta = max(sensitivity["measured_sensitivity"], sensitivity["claimed_sensitivity"]) * probe.units_per_query
        row = variance_shortfall(name, draws, probe.charged_multiplier * delta)
        rows.append(
            Finding(
                name,
                "noise std per unit of sensitivity (measured or declared, the larger)",
                row.measured / delta,
                probe.charged_multiplier,
                row.test,
                row.p_value,
            )
        )
    return rows


#: The inspector's sensitivity probes (:func:`.sensitivity.measure_sensitivity`): fewer than the
#: audit's, the scale 100 kept so that every clip binds, plus two-example batches of 4 probes at scale
#: 10 and 4 at 100 under add/remove (a clip of the batch's sum rather than of each example shows there).
SENSITIVITY_PROBES: dict[str, Any] = {"n_real": 4, "n_random": 2, "scales": (1.0, 10.0, 100.0), "pairs": 4}


def _sensitivity_rows(trainer: Trainer) -> tuple[list[Finding], dict[str, Any] | None]:
    if not trainer.method.single_release:
        return [], None
    measured = measure_sensitivity(trainer, **SENSITIVITY_PROBES)
    found, declared = measured["measured_sensitivity"], measured["claimed_sensitivity"]
    row = Finding(
        "update release (pre-noise)",
        f"L2 sensitivity ({measured['neighboring']})",
        found,
        declared,
        "rule: measured <= declared (1 + 1e-4), float32 updates",
        None,
        found > declared * (1 + 1e-4),
    )
    rows = [row]
    if "additivity_departure" in measured:  # add/remove: one charged term per example
        tolerance = 1e-3 * measured["claimed_sensitivity"]
        rows.append(
            Finding(
                "update release (pre-noise)",
                "departure from a sum of per-example terms",
                measured["additivity_departure"],
                0.0,
                f"rule: <= {tolerance:.2g}",
                None,
                measured["additivity_departure"] > tolerance,
            )
        )
    return rows, measured


def _charged_rate(trainer: Trainer) -> float | None:
    event: Any = trainer.method.planned_event()  # a sampled event's rate fields, where it has them
    if hasattr(event, "sampling_rate"):
        return float(event.sampling_rate)
    if hasattr(event, "batch_size") and hasattr(event, "dataset_size"):
        return event.batch_size / event.dataset_size
    return None


def inspect(
    config: TrainConfig,
    data: Dataset | None = None,
    *,
    steps: int = 4,
    sampler_steps: int = 400,
    alpha: float = DEFAULT_ALPHA,
    log: Callable[[str], None] | None = None,
) -> InspectionReport:
    """Inspect every mechanism of a run of ``config`` (module docstring); returns the report.
    Builds two trainers of ``config`` (the second for the replay check and one real epoch)."""
    if not METHODS[config.method].private:
        raise ValueError(f"method {config.method!r} is not private: the inspector has no ledger to hold it against")
    began, quiet = time.perf_counter(), log or (lambda message: None)
    rows: list[Finding] = []
    skipped: list[str] = []
    with Trainer(config, data=data, progress=False, log=quiet) as trainer:
        sensitivity_rows, sensitivity = _sensitivity_rows(trainer)
        rows += sensitivity_rows
        if sensitivity is None:
            skipped.append(f"sensitivity: {config.method} has no single release to measure it on")
        probe = probe_noise(trainer, steps)
        if probe is None:
            skipped.append(f"per-step noise: {config.method}'s ledger charges a claim or an unbounded event")
        else:
            rows += noise_findings(probe, sensitivity)
        rate = _charged_rate(trainer)
        if rate is None or trainer.sampler.kind not in ("fixed", "poisson"):
            skipped.append(f"sampler ({trainer.sampler.kind}): no rate of that law in the ledger's event")
        else:
            rows += check_sampler(trainer.sampler, rate, sampler_steps)
        rows += check_centering(trainer)
    if probe is not None:  # a guarantee whose noise the checks above observed
        with Trainer(config, data=data, progress=False, log=quiet) as second:
            again = probe_noise(second, 1)
            assert again is not None
            rows.append(replay_finding(probe.draws[0], again.draws[0]))
            rows.append(count_noise_draws(second))
    return _report(config, rows, skipped, alpha, time.perf_counter() - began)


def _report(
    config: TrainConfig, findings: list[Finding], skipped: list[str], alpha: float, seconds: float
) -> InspectionReport:
    tests = sum(1 for f in findings if f.p_value is not None)
    level = alpha / max(tests, 1)
    rows = [
        InspectionRow(f.mechanism, f.quantity, f.measured, f.charged, f.test, f.p_value, f.verdict(level))
        for f in findings
    ]
    return InspectionReport(config.method, config.noise_source, alpha, level, rows, skipped, seconds)
