"""The black-box one-run audit: input canaries scored by the final model's loss."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from opu_hal.randomness.secure_random import SecureGenerator

from ..core.data import Dataset, Split, load_dataset, scale_inputs, scaling_reference, with_public_classes
from ..core.errors import TrainingConfigError
from ..methods import METHODS, get_spec
from ..run.config import TrainConfig
from ..run.loop import Trainer
from .bounds import best_lower_bound, gdp_epsilon_estimate


def neighboring_of(config: TrainConfig) -> str:
    """The relation the method's claim is made under (dp-sgd and dp-dfa: by their sampling)."""
    return METHODS[config.method].neighboring_for(config)


def input_canaries(count: int, features: int, classes: int, generator: SecureGenerator) -> Split:
    """``count`` images of uniform random pixels in [0, 1] with uniform random labels."""
    x = generator.uniform(count * features).reshape(count, features)
    y = np.minimum((generator.uniform(count) * classes).astype(np.int64), classes - 1)
    return Split(torch.from_numpy(x).float(), torch.from_numpy(y))


def check_claim(method: str) -> None:
    """Refuse a method whose registration has no black-box audit (not private: no claim to audit)."""
    if "black-box" not in get_spec(method).audits:
        raise TrainingConfigError(f"method {method!r} is not private; there is no claim to audit")


def audit_black_box(
    config: TrainConfig,
    canaries: int = 1000,
    confidence: float = 0.95,
    guess_counts: tuple[int, ...] = (10, 25, 50, 100, 200, 400),
    data: Dataset | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """One-run black-box audit: input canaries scored by the final model's loss.

    Canary ``i`` is an image of uniform random pixels with a random label, in the training set
    with probability 1/2 (secret coin). Under add/remove the other choice is its absence; under
    replace-one (the dataset size is fixed) it is the same image with another label, so the two
    datasets are neighbours either way. The training goes through the public trainer unchanged;
    the auditor sees only the final model and scores ``-loss(x_i, y_i)`` (high: guessed included),
    then the bound is :func:`best_lower_bound`'s."""
    check_claim(config.method)
    if canaries < 2:
        raise TrainingConfigError(f"--canaries must be >= 2, got {canaries}")
    began = time.perf_counter()
    raw = data or load_dataset(config.dataset, config.data_dir, config.validation_fraction, config.seed)
    raw = with_public_classes(raw, config.n_classes)  # the canaries' labels: a public count (issue 44)
    real = (
        raw.train
        if config.train_limit is None
        else Split(raw.train.x[: config.train_limit], raw.train.y[: config.train_limit])
    )
    generator = SecureGenerator()
    probes = input_canaries(canaries, raw.n_features, raw.n_classes, generator)
    heads = generator.uniform(canaries) < 0.5
    included = torch.from_numpy(heads)
    neighboring = neighboring_of(config)
    if neighboring == "replace_one":
        shift = torch.from_numpy(1 + (generator.uniform(canaries) * (raw.n_classes - 1)).astype(np.int64))
        slots = Split(probes.x, torch.where(included, probes.y, (probes.y + shift) % raw.n_classes))
    else:
        slots = Split(probes.x[included], probes.y[included])
    train = Split(torch.cat([real.x, slots.x]), torch.cat([real.y, slots.y]))
    audited = raw.with_splits(train, raw.validation, raw.test)
    trainer = Trainer(config.with_(train_limit=None), data=audited, progress=False, log=log or (lambda m: None))
    try:
        record = trainer.run()
    finally:
        trainer.close()
    reference = scaling_reference(raw, train, private=True)  # as the trainer scaled the audited run
    scaled = scale_inputs(raw.with_splits(probes, probes, probes), config.inputs, reference=reference).train
    with torch.no_grad():
        model_device = next(trainer.model.parameters()).device
        logits = trainer.model(scaled.x.to(model_device)).cpu()
        losses = torch.nn.functional.cross_entropy(logits, scaled.y, reduction="none")
    scores = (-losses).double().numpy()
    final = record["final"]
    result = best_lower_bound(scores, heads, config.delta, confidence, guess_counts)
    gdp = gdp_epsilon_estimate({"loss": scores}, heads, config.delta, confidence)
    return {
        "method": config.method,
        "noise_source": config.noise_source,
        "threat_model": "black-box, input canaries scored by the final model's loss",
        "neighboring": neighboring,
        # the guarantee, else a published claim's epsilon (DP-ULR's controller: paper 004's), else none
        "claimed_epsilon": final.get("epsilon", final.get("claimed_epsilon", float("inf"))),
        "delta": config.delta,
        "confidence": confidence,
        **result,
        **gdp,
        "canaries": canaries,
        "steps": final["steps"],
        "test_accuracy": final["test_accuracy"],
        "time_s": time.perf_counter() - began,
        "scores": {"heads": scores[heads].tolist(), "tails": scores[~heads].tolist()},
    }
