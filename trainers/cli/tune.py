"""``opu-hal tune``: private hyperparameter selection with a random number of runs (Papernot and
Steinke 2022, Algorithm 1 with Theorem 2 or Theorem 6), then a final run with the selected settings.

1. ``K ~ D_{eta, gamma}`` (truncated negative binomial, Theorem 2) or ``K ~ Poisson(mu)`` (Theorem 6;
   ``--k-distribution``), mean ``--mean-runs``, drawn by inversion from the secure generator
   (ChaCha20 under OS entropy; never from ``--seed``). Under Poisson ``K = 0`` happens (probability
   ``e^-mu``): Algorithm 1 then outputs nothing (``selected: null``), and the final run trains with
   the command line's own settings, fixed before any data was seen.
2. ``K`` candidates, each with settings drawn uniformly from the declared search space
   (``--space KEY=V1,V2,...``), are trained on the private training split; each is scored by its
   validation accuracy. The validation split is held out from the private dataset (README, "What
   the epsilons mean"), so a score is post-processing of a released model.
3. Only the best candidate (its settings and score) leaves the tuning: ``K``, the other candidates
   and their scores are secret (publishing ``K`` would void Theorem 2), so nothing is logged per
   candidate and no file is written per candidate (``--checkpoint`` is refused).
   The tuning's duration is public and tells nothing about ``K`` (issue 44, item 2): ``K`` is
   conditioned on ``K <= slots`` and every one of the ``slots`` candidate slots trains a drawn
   candidate; only the first ``K`` may be selected, the others are discarded. Conditioning costs
   ``delta`` (:func:`opu_hal.privacy.tuning.truncation_delta`): the RDP conversion gets
   ``(1 - TRUNCATION_SHARE) delta`` and ``slots`` is the fewest whose truncation fits ``delta``.
4. A final run trains with the selected settings; the total RDP (the theorem's curve plus the final
   run's ledger) is converted to (epsilon, delta) by the accountant's conversion. The per-run curve is
   the candidates' ledger, which the final run's must equal (with ``K = 0``, the final run's).

Only settings that cannot change a run's privacy ledger may be searched (:data:`TUNABLE`), so every
candidate has the same per-run RDP curve; each drawn candidate's ledger is checked against it.
"""

from __future__ import annotations

import io
import logging
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import replace
from typing import Any

import numpy as np

from opu_hal.privacy import Accountant
from opu_hal.privacy.tuning import (
    FixedRuns,
    PoissonRuns,
    RunsLaw,
    runs_tail,
    sample_within,
    slots_for,
    truncation_delta,
    tuning_epsilon,
)
from opu_hal.randomness.secure_random import SecureGenerator

from ..core.errors import TrainingConfigError
from ..run.config import TrainConfig
from ..run.public_surface import public_record
from .tune_budget import conversion_delta

#: Search-space keys: optimizer settings, post-processing and method options that leave the ledger
#: unchanged (the noise multiplier is relative to the clip norm, or to dp-dfa's tau_e / tau_h
#: sensitivity; forward noise and repeats are not privacy noise). Each candidate's ledger is still checked.
TUNABLE = {
    "lr": float,
    "momentum": float,
    "clip_norm": float,
    "tau_e": float,
    "tau_h": float,
    "lr_schedule": str,
    "weight_average": float,
    "opt.forward_std": str,
    "opt.baseline": str,
    "opt.repeats": str,
    "opt.z_lr": str,
    "opt.z_steps": str,
}


def parse_space(pairs: list[str]) -> dict[str, list[Any]]:
    """``KEY=V1,V2,...`` pairs into a search space; keys outside :data:`TUNABLE` are refused."""
    space: dict[str, list[Any]] = {}
    for pair in pairs:
        key, sep, values = pair.partition("=")
        key = key.strip()
        if not sep or key not in TUNABLE:
            raise TrainingConfigError(
                f"--space {pair!r}: KEY=V1,V2,... with KEY one of {', '.join(sorted(TUNABLE))} (settings that "
                "leave the privacy ledger unchanged)"
            )
        try:
            choices = [TUNABLE[key](v.strip()) for v in values.split(",") if v.strip()]
        except ValueError:
            raise TrainingConfigError(f"--space {key}: values must be numbers, got {values!r}") from None
        if not choices:
            raise TrainingConfigError(f"--space {key}: give at least one value")
        space[key] = choices
    if not space:
        raise TrainingConfigError("--space: declare at least one KEY=V1,V2,...")
    return space


@contextmanager
def silenced() -> Iterator[None]:
    """Nothing a candidate run prints or logs leaves the process (stdout, stderr, Python logging,
    warnings): the number of such lines would publish K."""
    sink = io.StringIO()
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with redirect_stdout(sink), redirect_stderr(sink), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)


def candidate(base: TrainConfig, space: dict[str, list[Any]], uniforms: np.ndarray) -> dict[str, Any]:
    """One point of the space, each key's value chosen by one uniform in [0, 1)."""
    return {
        key: values[min(int(u * len(values)), len(values) - 1)] for (key, values), u in zip(space.items(), uniforms)
    }


def configure(base: TrainConfig, settings: dict[str, Any]) -> TrainConfig:
    """``base`` with ``settings`` applied (``opt.KEY`` into the method options)."""
    extra = dict(base.extra or {})
    direct = {}
    for key, value in settings.items():
        if key.startswith("opt."):
            extra[key[4:]] = value
        else:
            direct[key] = value
    config = replace(base, extra=extra, **direct)
    config.validate()
    return config


def run_ledger(record: dict[str, Any]) -> Accountant:
    """A run's ledger; refuses one that holds a claim rather than a guarantee (no bound to tune)."""
    if not record.get("privacy"):
        raise TrainingConfigError(f"tune: method {record['method']!r} is not private; tune private methods only")
    accountant = Accountant.from_dict(record["privacy"]["ledger"])
    if accountant.claims():
        raise TrainingConfigError(
            f"tune: the run's ledger holds a published claim ({'; '.join(accountant.claims())}), not a "
            "guarantee; Theorem 2 needs a valid per-run RDP bound (e.g. dp-ulr: drop --opt mode=controller)"
        )
    return accountant


def check_tunable(base: TrainConfig) -> None:
    """Refuse settings the tuning cannot run privately (before any candidate trains)."""
    if base.target_epsilon is None and base.noise_multiplier is None:
        raise TrainingConfigError("tune: give --target-epsilon (each run's budget) or --noise-multiplier")
    if base.validation_fraction <= 0:
        raise TrainingConfigError(
            "tune: --validation-fraction 0 leaves no validation split to score the candidates "
            "on; keep one (default 0.1)"
        )
    if base.checkpoint is not None or base.resume:
        raise TrainingConfigError(
            "tune: --checkpoint / --resume: a candidate's checkpoint file would date the "
            "candidates, and so tell K; tune without checkpoints"
        )


class Slots:
    """The candidate slots of one tuning: every slot trains a candidate drawn from the space and is
    checked and scored the same way, whether it is one of the ``K`` real candidates or not, so the
    tuning's duration and its work do not depend on ``K`` (issue 44, item 2)."""

    def __init__(
        self,
        base: TrainConfig,
        space: dict[str, list[Any]],
        generator: SecureGenerator,
        train: Callable[[TrainConfig], dict[str, Any]],
    ) -> None:
        self.base, self.space, self.generator, self.train = base, space, generator, train
        self.ledger: dict[str, Any] | None = None
        self.results: list[tuple[float, dict[str, Any]]] = []
        self.records: list[dict[str, Any]] = []  # secret: only the selected one may be published

    def run_one(self) -> None:
        settings = candidate(self.base, self.space, self.generator.uniform(len(self.space)))
        with silenced():  # a line per candidate on stderr (a plan, a warning) would count K
            record = self.train(configure(self.base, settings))
        entries = run_ledger(record).to_dict()
        if self.ledger is not None and entries != self.ledger:
            raise TrainingConfigError(
                "tune: two candidates charged different ledgers; a searched key changes the "
                "privacy of a run, which the theorems' single per-run curve does not allow"
            )
        self.ledger = entries
        self.results.append((float(record["final"]["validation_accuracy"]), settings))
        self.records.append(record)

    def best_index(self, runs: int) -> int | None:
        """The best of the first ``runs`` slots (ties keep the earlier); the others are discarded."""
        best: int | None = None
        for index, (score, _settings) in enumerate(self.results[:runs]):
            if best is None or score > self.results[best][0]:
                best = index
        return best


def tuned_epsilon(
    per_run: Accountant, final: Accountant | None, law: RunsLaw, delta: float
) -> tuple[np.ndarray, float]:
    """The tuning's RDP curve (``law``'s theorem on ``per_run``) and the epsilon at ``delta`` of it
    composed with ``final``'s ledger (``None``: no final run, the tuning alone)."""
    tuning_rdp = law.tuning_rdp(per_run.orders, per_run.rdp)
    return tuning_rdp, tuning_epsilon(per_run.orders, tuning_rdp + (0.0 if final is None else final.rdp), delta)[0]


def final_run(
    base: TrainConfig,
    work: Slots,
    index: int | None,
    release: str,
    train: Callable[[TrainConfig], dict[str, Any]],
) -> tuple[dict[str, Any] | None, Accountant | None]:
    """What the tuning publishes as its run, with the ledger it adds to the tuning's: a final run
    trained with the selected settings (``final-run``; with ``K = 0``, under Poisson, the command
    line's, fixed before any data was seen), or the selected candidate's own record and nothing more
    (``best-candidate``: Algorithm 1's output; ``None`` when ``K = 0`` selects nothing). ``index``:
    the selected slot (:meth:`Slots.best_index`)."""
    if release == "best-candidate":
        return (None if index is None else work.records[index]), None
    record = train(configure(base, {} if index is None else work.results[index][1]))
    final = run_ledger(record)
    if final.to_dict() != work.ledger:
        raise TrainingConfigError("tune: the final run charged another ledger than the candidates")
    return record, final


def tune(
    base: TrainConfig,
    space: dict[str, list[Any]],
    law: RunsLaw,
    train: Callable[[TrainConfig], dict[str, Any]],
    generator: SecureGenerator | None = None,
    slots: int | None = None,
    release: str = "final-run",
) -> dict[str, Any]:
    """Algorithm 1 with ``K ~ law`` conditioned on ``K <= slots``, then the final run (``release``:
    :func:`final_run`); returns the public tuning record. All ``slots`` candidates train whatever ``K`` is; only the first ``K`` may
    be selected. ``slots=None``: the fewest whose truncation fits ``base.delta``
    (:func:`~opu_hal.privacy.tuning.slots_for`), fixed by the first slot's ledger (public)."""
    check_tunable(base)
    generator = generator or SecureGenerator()
    uniform = float(generator.uniform(1)[0])  # K's draw, first (the tests' hook fixes it)
    delta, delta_conversion = base.delta, conversion_delta(law, base.delta)
    work = Slots(base, space, generator, train)
    work.run_one()
    per_run = Accountant.from_dict(work.ledger)  # type: ignore[arg-type]
    planned = tuned_epsilon(per_run, per_run, law, delta_conversion)[1]
    needed = slots_for(law, planned, delta, delta_conversion)
    if slots is None:
        slots = needed
    elif slots < needed:
        raise TrainingConfigError(
            f"tune: --slots {slots}: truncating K to {slots} runs costs more than --delta "
            f"{delta:g} at epsilon {planned:.4g}; use --slots >= {needed}"
        )
    runs = sample_within(law, slots, uniform)
    while len(work.results) < slots:
        work.run_one()
    index = work.best_index(runs)
    best = None if index is None else work.results[index]
    final_record, final = final_run(base, work, index, release, train)
    tuning_rdp, total = tuned_epsilon(per_run, final, law, delta_conversion)
    total_delta = truncation_delta(law, slots, total, delta_conversion)
    theorem = "Theorem 6" if isinstance(law, PoissonRuns) else "Theorem 2"
    return {
        "method": base.method,
        "tuning": {
            "procedure": f"Papernot and Steinke 2022, Algorithm 1: best of K runs, K conditioned on K <= slots; RDP "
            f"by {theorem}, "
            + ("composed with the final run's ledger" if final is not None else "the selected candidate's run released")
            + "; the truncation paid in delta",
            "release": release,
            **law.describe(),
            "mean_runs": law.mean,
            "slots": slots,
            "truncation_tail": runs_tail(law, slots),
            "search_space": space,
            "selected": None if best is None else best[1],
            "selected_validation_accuracy": None if best is None else best[0],
            "score": "validation accuracy (held-out split, not part of the private dataset)",
            "per_run_epsilon": per_run.get_epsilon(delta),
            "tuning_epsilon": tuning_epsilon(per_run.orders, tuning_rdp, delta_conversion)[0],
            "final_run_epsilon": None if final is None else final.get_epsilon(delta),
            "total_epsilon": total,
            "delta": total_delta,
            "delta_conversion": delta_conversion,
            "secret": (
                "the other candidates and their scores"
                if isinstance(law, FixedRuns)
                else "K, the other candidates and their scores"
            ),
            "timing": f"public: {slots} candidate runs"
            + (" and the final run" if final is not None else "")
            + ", whatever K is",
        },
        "final_run": None if final_record is None else public_record(final_record),
    }


def summary(record: dict[str, Any]) -> str:
    t = record["tuning"]
    released = t.get("release", "final-run") == "best-candidate"
    selected = (
        f"nothing (K = 0: {'no run is released' if released else 'the final run used the command line settings'})"
        if t["selected"] is None
        else f"{t['selected']} (validation accuracy {t['selected_validation_accuracy']:.4f})"
    )
    if "runs" in t:
        runs = f"K = {t['runs']}, public: {t['slots']} candidate runs composed"
    else:
        law = (
            f"Poisson, mean {t['mu']:.4g}"
            if "mu" in t
            else f"truncated negative binomial, eta {t['eta']:g}, mean {t['mean_runs']:.4g}"
        )
        runs = f"K ~ {law}, conditioned on K <= {t['slots']}: {t['slots']} candidate runs trained whatever K is"
    run = "the selected candidate's run" if released else "final run"
    accuracy = (
        f"{run} test accuracy {record['final_run']['final']['test_accuracy']:.4f}; "
        if record["final_run"] is not None
        else ""
    )
    total = "total, the tuning alone" if released else "total with the final run"
    return (
        f"tune {record['method']}: selected {selected}; {accuracy}epsilon per run {t['per_run_epsilon']:.4g}, "
        f"tuning {t['tuning_epsilon']:.4g}, {total} {t['total_epsilon']:.4g} at delta {t['delta']:g} ({runs})"
    )
