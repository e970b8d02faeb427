"""White-box audits: Dirac canaries (:mod:`.dirac`) of the measured sensitivity on the flattened
update, one run or many (see :mod:`trainers.audit`). Two canary modes for the one-run audit:
``pipeline`` (the default: canaries are rows of the training set, drawn by the run's own sampler and
summed by its centring release, :mod:`.pipeline`) and ``update`` (canaries join the update at the
claimed rate by their own coin, after the sampler and after centring)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from opu_hal.randomness.secure_random import SecureGenerator

from ..core.errors import TrainingConfigError
from ..methods import METHODS, SPECS, GaussianNoiseMethod, get_spec
from ..run.config import TrainConfig
from ..run.loop import Trainer
from .bounds import (
    GUESS_COUNTS,
    best_over_kinds,
    gdp_epsilon,
    gdp_epsilon_estimate,
    gdp_mu_lower_bound,
    multi_run_lower_bound,
)
from .dirac import DiracCanaries
from .pipeline import CanaryTrainer, PipelineCanaries, place_on_update
from .sensitivity import measure_sensitivity

CANARY_MODES = ("pipeline", "update")


def white_box_methods() -> tuple[str, ...]:
    """Registered methods with one noisy release per step (``MethodSpec.audits``), which the audit intercepts."""
    return tuple(name for name, spec in SPECS.items() if "white-box" in spec.audits)


Release = Callable[[torch.Tensor], torch.Tensor]


def _check_white_box(config: TrainConfig) -> None:
    if "white-box" not in get_spec(config.method).audits:
        raise TrainingConfigError(
            f"the white-box audit covers the methods with one noisy release per step "
            f"({', '.join(white_box_methods())}); got --method {config.method}"
        )


def _train_with(
    trainer: Trainer,
    planted: DiracCanaries | PipelineCanaries,
    wrap_release: Callable[[Release], Release] | None,
    attacker_view: Callable[[torch.Tensor, int], torch.Tensor] | None,
) -> dict[str, Any]:
    """Run ``trainer`` with ``planted`` canaries inserted before every noisy release and scored on
    what the auditor sees of it; returns the training record (the trainer is closed)."""
    method = trainer.method
    release = wrap_release(method.release_update) if wrap_release else method.release_update
    steps = [0]

    def audited(update: torch.Tensor) -> torch.Tensor:
        planted_update = planted.plant(update) if isinstance(planted, PipelineCanaries) else planted.insert(update)
        released = release(planted_update)
        seen = released - update if planted.sampling_rate >= 1 else released  # the base update is public at rate 1
        planted.observe(seen if attacker_view is None else attacker_view(seen, steps[0]))
        steps[0] += 1
        return released

    method.intercept_release(audited)
    try:
        return trainer.run()
    finally:
        method.intercept_release(None)
        trainer.close()


def _sampling_note(rate: float) -> str:
    if rate >= 1:
        return "rate 1: every canary joins every step (no secret inclusion, the claim has no amplification)"
    return (
        f"rate {rate:.4g}: inclusion drawn independently per step (a Poisson stand-in) and kept secret: "
        "every step is scored"
    )


def audit_white_box(
    config: TrainConfig,
    canaries: int = 1000,
    confidence: float = 0.95,
    guess_counts: tuple[int, ...] = GUESS_COUNTS,
    wrap_release: Callable[[Release], Release] | None = None,
    attacker_view: Callable[[torch.Tensor, int], torch.Tensor] | None = None,
    data=None,
    device=None,
    log: Callable[[str], None] | None = None,
    canary_mode: str = "pipeline",
) -> dict[str, Any]:
    """Train ``config`` once with white-box canaries sized from the measured sensitivity
    (:func:`measure_sensitivity`); returns the audit record: the Steinke et al. 2023 bound
    (``epsilon_lower_bound``, assumption-free, the primary figure), the Gaussian-DP estimate of
    Nasr et al. 2023 (``gdp_epsilon_estimate``, assumes a Gaussian trade-off), the claimed and the
    measured sensitivity, and ``flagged`` with its ``findings``.

    ``canary_mode`` (module docstring): ``pipeline`` audits the run as it would train on its
    training set plus the canaries' rows (its claim is re-accounted for that set); ``update`` plants
    the canaries in the update at the claimed rate. ``wrap_release`` replaces the mechanism's release
    (tests use it to plant broken mechanisms while the accountant keeps claiming the nominal
    epsilon); ``attacker_view(seen, step)`` is what the auditor scores instead of ``seen``, the
    release less the known rest of the update at rate 1 (pipeline mode: the base examples' update)
    and the release itself below it (e.g. ``seen`` minus noise rebuilt from a public seed)."""
    _check_white_box(config)
    if canaries < 2:
        raise TrainingConfigError(f"--canaries must be >= 2, got {canaries}")
    if canary_mode not in CANARY_MODES:
        raise TrainingConfigError(f"--canary-mode {canary_mode!r}: choose {' or '.join(CANARY_MODES)}")
    began = time.perf_counter()
    quiet = log or (lambda m: None)
    if canary_mode == "pipeline":
        replace_one = METHODS[config.method].neighboring_for(config) == "replace_one"
        pipeline = PipelineCanaries.draw(canaries, replace_one)
        trainer: Trainer = CanaryTrainer(config, pipeline, data=data, device=device, progress=False, log=quiet)
    else:
        trainer = Trainer(config, data=data, device=device, progress=False, log=quiet)
    try:
        sensitivity = measure_sensitivity(trainer)
    except BaseException:
        trainer.close()
        raise
    measured = sensitivity["measured_sensitivity"]
    if canary_mode == "pipeline":
        place_on_update(
            pipeline, trainer.method.dimension, measured, trainer.sampler.sampling_rate, _accounted_std(trainer)
        )
        note = _pipeline_note(trainer)
        record = _train_with(trainer, pipeline, wrap_release, attacker_view)
        return _white_box_record(
            config, pipeline, _pipeline_scores(pipeline), record, sensitivity, confidence, guess_counts, began, note
        )
    rate = min(1.0, config.batch_size / len(trainer.train_split))
    planted = DiracCanaries.draw(canaries, trainer.method.dimension, measured / 2, rate)
    record = _train_with(trainer, planted, wrap_release, attacker_view)
    return _white_box_record(
        config,
        planted,
        planted.scores,
        record,
        sensitivity,
        confidence,
        guess_counts,
        began,
        _sampling_note(planted.sampling_rate),
    )


def _accounted_std(trainer: Trainer) -> float | None:
    """The per-coordinate std of the run's accounted Gaussian noise (software noise), else ``None``
    (device noise is accounted as a lattice law, not scored by the Gaussian likelihood ratio)."""
    if trainer.config.noise_source != "software" or not isinstance(trainer.method, GaussianNoiseMethod):
        return None
    return float(trainer.method.noise_std)


def _pipeline_scores(planted: PipelineCanaries) -> dict[str, np.ndarray]:
    """The score kinds the bound tries (Bonferroni over them): the likelihood ratio only where the
    accounted law is Gaussian, the empirical-law ratio only at rate 1, the centring score only where
    a private centring release was seen."""
    dropped = {"likelihood"} if planted.noise_std is None else set()
    dropped |= {"empirical"} if planted.sampling_rate < 1 else set()
    return {kind: s for kind, s in planted.scores.items() if kind not in dropped}


def _pipeline_note(trainer: Trainer) -> str:
    rows = (
        "heads as itself, tails as its twin"
        if trainer.method.neighboring == "replace_one"
        else "present if heads, absent if tails"
    )
    centring = ", summed by the centring release" if trainer.centering is not None else ""
    return (
        f"pipeline: each canary one training row ({rows}), batched by the run's own {trainer.sampler.kind} "
        f"sampler at rate {trainer.sampler.sampling_rate:.4g}{centring}; every step is scored"
    )


def _white_box_record(
    config: TrainConfig,
    planted: DiracCanaries | PipelineCanaries,
    scores: dict[str, np.ndarray],
    record: dict[str, Any],
    sensitivity: dict[str, Any],
    confidence: float,
    guess_counts: tuple[int, ...],
    began: float,
    note: str,
) -> dict[str, Any]:
    claimed = record["final"]["epsilon"]
    steinke = best_over_kinds(scores, planted.heads, config.delta, confidence, guess_counts)
    gdp = gdp_epsilon_estimate(scores, planted.heads, config.delta, confidence)
    findings = []
    if steinke["epsilon_lower_bound"] > claimed:
        findings.append("epsilon_lower_bound > claimed_epsilon")
    if sensitivity["sensitivity_exceeds_claim"]:
        findings.append("measured_sensitivity > claimed_sensitivity")
    best = scores[steinke["score_kind"]]
    mode = "pipeline" if isinstance(planted, PipelineCanaries) else "update"
    return {
        "method": config.method,
        "noise_source": config.noise_source,
        "threat_model": f"white-box, Dirac canaries of the measured sensitivity ({mode} mode)",
        "canary_mode": mode,
        "claimed_epsilon": claimed,
        "delta": config.delta,
        "confidence": confidence,
        **steinke,
        **gdp,
        **sensitivity,
        "flagged": bool(findings),
        "findings": findings,
        "gdp_exceeds_claim": gdp["gdp_epsilon_estimate"] > claimed,
        "canaries": len(planted.heads),
        "canary_magnitude": planted.magnitude,
        "canary_sampling": note,
        "sampling_rate": planted.sampling_rate,
        "canaries_never_sampled": int((planted.joined == 0).sum()),
        "steps": record["final"]["steps"],
        "test_accuracy": record["final"]["test_accuracy"],
        "time_s": time.perf_counter() - began,
        "scores": {"heads": best[planted.heads].tolist(), "tails": best[~planted.heads].tolist()},
    }


def audit_multi_run(
    config: TrainConfig,
    runs: int = 40,
    confidence: float = 0.95,
    wrap_release: Callable[[Release], Release] | None = None,
    data=None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The classical white-box audit for small models: ``runs`` trainings with one Dirac canary on
    a fixed coordinate, ``+Delta/2`` in the even runs and ``-Delta/2`` in the odd ones (neighbours,
    as in the one-run audit, ``Delta`` measured on the first run's model, the same in every run), scored by the ``sum`` score; bound by
    :func:`multi_run_lower_bound`, plus the Gaussian-DP estimate of the same scores. It
    cross-checks the one-run bound at the price of ``runs`` trainings."""
    _check_white_box(config)
    if runs < 2:
        raise TrainingConfigError(f"--runs must be >= 2, got {runs}")
    began = time.perf_counter()
    coordinate: np.ndarray | None = None
    scores: dict[bool, list[float]] = {True: [], False: []}
    claimed = float("inf")
    sensitivity: dict[str, Any] | None = None
    for run in range(runs):
        heads = run % 2 == 0
        trainer = Trainer(config, data=data, progress=False, log=log or (lambda m: None))
        if sensitivity is None:  # every run starts from the same model (same config and seed)
            try:
                sensitivity = measure_sensitivity(trainer)
            except BaseException:
                trainer.close()
                raise
        if coordinate is None:
            coordinate = np.array([int(SecureGenerator().uniform(1)[0] * trainer.method.dimension)])
        rate = min(1.0, config.batch_size / len(trainer.train_split))
        planted = DiracCanaries(coordinate, np.array([heads]), sensitivity["measured_sensitivity"] / 2, rate)
        record = _train_with(trainer, planted, wrap_release, None)
        scores[heads].append(float(planted.scores["sum"][0]))
        claimed = record["final"]["epsilon"]
    scores_in, scores_out = np.array(scores[True]), np.array(scores[False])
    bound, threshold = multi_run_lower_bound(scores_in, scores_out, config.delta, confidence)
    mu, _ = gdp_mu_lower_bound(scores_in, scores_out, confidence)
    return {
        "method": config.method,
        "noise_source": config.noise_source,
        "threat_model": "white-box, multi-run",
        "claimed_epsilon": claimed,
        "delta": config.delta,
        "confidence": confidence,
        "epsilon_lower_bound": bound,
        "threshold": threshold,
        "gdp_mu_lower_bound": mu,
        "gdp_epsilon_estimate": gdp_epsilon(mu, config.delta),
        "gdp_assumption": "assumes a Gaussian trade-off (mu-GDP)",
        **(sensitivity or {}),
        "runs": runs,
        "canaries": 1,
        "time_s": time.perf_counter() - began,
        "scores": {"heads": scores[True], "tails": scores[False]},
    }
