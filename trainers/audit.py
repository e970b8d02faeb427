"""Empirical lower bounds on epsilon: the one-run audit of Steinke, Nasr and Jagielski, "Privacy
Auditing with One (1) Training Run" (NeurIPS 2023), white-box, for every method whose noisy
release is one call ``method.release_update(u)`` on the flattened update ``u`` whose L2
sensitivity is ``method.sensitivity`` (dp-dfa with software or device noise, dp-sgd).

**Bound** (their Theorem 3.3 with the delta term of Appendix D). ``m`` canaries each get a secret
fair coin; the auditor guesses ``r`` of the coins and gets ``v`` right. If the training run is
(epsilon, delta)-DP in each canary, then

    P[v' >= v] <= P[Binomial(r, e^eps / (1 + e^eps)) >= v]
                  + 2 m delta max_{i = 1..v} P[v > Binomial(r, e^eps / (1 + e^eps)) >= v - i] / i,

so the largest epsilon whose p-value is below ``1 - confidence`` is a lower bound on the run's true
epsilon at that confidence (:func:`epsilon_lower_bound`). Several guess counts are tried with a
Bonferroni split of the confidence.

**Canaries** (white-box, the threat model the DP proofs cover): canary ``i`` owns one coordinate
``j_i`` of the flattened update. At each step it joins the batch with the batch's sampling rate;
when it does, it adds ``+a e_{j_i}`` if its coin is heads and ``-a e_{j_i}`` if tails, with ``a`` half
the update's sensitivity ``Delta``: under replace-one (dp-dfa, dp-sgd fixed) the two coins are
neighbours; under add/remove (dp-sgd Poisson, ``Delta = C``) the pair ``{+Delta/2, -Delta/2}`` gives
the auditor exactly the evidence of ``{present with +Delta, absent}`` (the scores differ by a shift
the auditor knows), so the same test applies. Its score is the sum of the RELEASED update at ``j_i`` over
the steps it joined; the auditor guesses heads for the highest scores and tails for the lowest.
The canaries' own sampling is independent per step at the batch's rate (a Poisson stand-in for
the without-replacement draw of a real example), a simplification stated with every result.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
from scipy import stats

from opu_hal.secure_random import SecureGenerator

from .config import TrainConfig
from .data import Dataset, Split, load_dataset, scale_inputs
from .errors import TrainingConfigError
from .loop import Trainer
from .methods import METHODS


def p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """Probability of at least ``v`` correct guesses out of ``r`` under (epsilon, delta)-DP."""
    q = 1 / (1 + math.exp(-epsilon))
    tail = float(stats.binom.sf(v - 1, r, q))
    worst, below = 0.0, 0.0
    for i in range(1, v + 1):
        below += float(stats.binom.pmf(v - i, r, q))
        worst = max(worst, below / i)
    return min(1.0, tail + 2 * m * delta * worst)


def epsilon_lower_bound(m: int, r: int, v: int, delta: float, confidence: float) -> float:
    """Largest epsilon rejected at ``confidence`` by ``v`` correct of ``r`` guesses (0 if none)."""
    if not (0 <= v <= r <= m and 0 < confidence < 1 and 0 <= delta < 1):
        raise TrainingConfigError(f"need 0 <= v <= r <= m and confidence in (0, 1); got m={m} r={r} v={v}")
    alpha = 1 - confidence
    if r == 0 or p_value(m, r, v, 0.0, delta) >= alpha:
        return 0.0
    low, high = 0.0, 1.0
    while p_value(m, r, v, high, delta) < alpha and high < 100:
        low, high = high, high * 2
    for _ in range(50):
        middle = (low + high) / 2
        if p_value(m, r, v, middle, delta) < alpha:
            low = middle
        else:
            high = middle
    return low


def best_lower_bound(scores: np.ndarray, heads: np.ndarray, delta: float, confidence: float,
                     guess_counts: tuple[int, ...]) -> dict[str, Any]:
    """Guess heads for the ``k`` highest and tails for the ``k`` lowest scores, for each ``k``; the
    best bound with the confidence split over the counts tried (Bonferroni)."""
    m = len(scores)
    order = np.argsort(scores)
    counts = [k for k in guess_counts if 2 * k <= m] or [m // 2]
    split = 1 - (1 - confidence) / len(counts)
    best = {"epsilon_lower_bound": 0.0, "guesses": 0, "correct": 0}
    for k in counts:
        guessed_heads, guessed_tails = order[m - k:], order[:k]
        correct = int(heads[guessed_heads].sum() + (~heads[guessed_tails]).sum())
        bound = epsilon_lower_bound(m, 2 * k, correct, delta, split)
        if bound > best["epsilon_lower_bound"] or best["guesses"] == 0:
            best = {"epsilon_lower_bound": bound, "guesses": 2 * k, "correct": correct}
    return best


@dataclass
class DiracCanaries:
    """White-box canaries on a flattened update (module docstring)."""

    coordinates: np.ndarray
    heads: np.ndarray
    magnitude: float
    sampling_rate: float
    generator: SecureGenerator = field(default_factory=SecureGenerator)
    scores: np.ndarray = field(init=False)
    joined: np.ndarray = field(init=False)
    _current: np.ndarray | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.scores = np.zeros(len(self.coordinates))
        self.joined = np.zeros(len(self.coordinates), dtype=np.int64)

    @classmethod
    def draw(cls, count: int, dimension: int, magnitude: float, sampling_rate: float) -> "DiracCanaries":
        generator = SecureGenerator()
        if count > dimension:
            raise TrainingConfigError(f"--canaries {count}: the update has only {dimension} coordinates")
        coordinates = np.argsort(generator.uniform(dimension))[:count]
        heads = generator.uniform(count) < 0.5
        return cls(coordinates, heads, magnitude, sampling_rate, generator)

    def insert(self, update: torch.Tensor) -> torch.Tensor:
        """The update with this step's sampled canaries added (before the noise)."""
        self._current = self.generator.uniform(len(self.coordinates)) < self.sampling_rate
        signs = np.where(self.heads, 1.0, -1.0) * self._current * self.magnitude
        update = update.clone()
        index = torch.from_numpy(self.coordinates).to(update.device)
        update[index] += torch.from_numpy(signs).to(update.device, update.dtype)
        return update

    def observe(self, released: torch.Tensor) -> None:
        """Add the released values at the sampled canaries' coordinates to their scores."""
        values = released.detach().cpu().double().numpy()[self.coordinates]
        self.scores += np.where(self._current, values, 0.0)
        self.joined += self._current


WHITE_BOX_METHODS = ("dp-dfa", "dp-sgd")


Release = Callable[[torch.Tensor], torch.Tensor]


def _check_white_box(config: TrainConfig) -> None:
    if config.method not in WHITE_BOX_METHODS:
        raise TrainingConfigError(
            f"the white-box audit covers the methods with one noisy release per step "
            f"({', '.join(WHITE_BOX_METHODS)}); got --method {config.method}")


def _train_with(trainer: Trainer, planted: DiracCanaries, wrap_release: Callable[[Release], Release] | None,
                attacker_view: Callable[[torch.Tensor, int], torch.Tensor] | None) -> dict[str, Any]:
    """Run ``trainer`` with ``planted`` canaries inserted before every noisy release and scored on
    what the auditor sees of it; returns the training record (the trainer is closed)."""
    method = trainer.method
    release = wrap_release(method.release_update) if wrap_release else method.release_update
    steps = [0]

    def audited(update: torch.Tensor) -> torch.Tensor:
        released = release(planted.insert(update))
        planted.observe(released if attacker_view is None else attacker_view(released, steps[0]))
        steps[0] += 1
        return released

    method.release_update = audited  # type: ignore[method-assign]
    try:
        return trainer.run()
    finally:
        trainer.close()


def audit_white_box(config: TrainConfig, canaries: int = 1000, confidence: float = 0.95,
                    guess_counts: tuple[int, ...] = (10, 25, 50, 100, 200, 400),
                    wrap_release: Callable[[Release], Release] | None = None,
                    attacker_view: Callable[[torch.Tensor, int], torch.Tensor] | None = None,
                    data=None, device=None, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Train ``config`` once with white-box canaries; returns the audit record.

    ``wrap_release`` replaces the mechanism's release (tests use it to plant broken mechanisms while
    the accountant keeps claiming the nominal epsilon); ``attacker_view(released, step)`` is what
    the auditor scores instead of the released update (e.g. the release minus noise rebuilt from a
    public seed)."""
    _check_white_box(config)
    if canaries < 2:
        raise TrainingConfigError(f"--canaries must be >= 2, got {canaries}")
    began = time.perf_counter()
    trainer = Trainer(config, data=data, device=device, progress=False, log=log or (lambda m: None))
    method = trainer.method
    rate = config.batch_size / len(trainer.train_split)
    planted = DiracCanaries.draw(canaries, method.dimension, method.sensitivity / 2, rate)
    record = _train_with(trainer, planted, wrap_release, attacker_view)
    result = best_lower_bound(planted.scores, planted.heads, config.delta, confidence, guess_counts)
    return {
        "method": config.method, "noise_source": config.noise_source, "threat_model": "white-box, Dirac canaries",
        "claimed_epsilon": record["final"]["epsilon"], "delta": config.delta, "confidence": confidence,
        **result, "canaries": canaries, "canary_sampling": "independent per step at the batch's rate",
        "canaries_never_sampled": int((planted.joined == 0).sum()), "steps": record["final"]["steps"],
        "test_accuracy": record["final"]["test_accuracy"], "time_s": time.perf_counter() - began,
        "scores": {"heads": planted.scores[planted.heads].tolist(), "tails": planted.scores[~planted.heads].tolist()},
    }


def clopper_pearson_upper(failures: int, trials: int, confidence: float) -> float:
    """One-sided upper confidence bound on a binomial rate (exact, Clopper-Pearson)."""
    if failures == trials:
        return 1.0
    return float(stats.beta.ppf(confidence, failures + 1, trials - failures))


def multi_run_lower_bound(scores_in: np.ndarray, scores_out: np.ndarray, delta: float,
                          confidence: float) -> tuple[float, float | None]:
    """The classical audit's bound: for a threshold ``t`` (guess "in" when ``score >= t``),
    (epsilon, delta)-DP forces ``FPR + e^eps FNR >= 1 - delta`` and the mirrored inequality, so
    ``eps >= log((1 - delta - FNR_up) / FPR_up)`` with Clopper-Pearson upper bounds; the best over
    the observed thresholds, the confidence split over thresholds and both rates (Bonferroni).
    Returns ``(epsilon lower bound, threshold)``."""
    thresholds = np.unique(np.concatenate([scores_in, scores_out]))
    each = 1.0 - (1.0 - confidence) / (2 * thresholds.size)
    best, best_t = 0.0, None
    for t in thresholds:
        fnr_up = clopper_pearson_upper(int((scores_in < t).sum()), scores_in.size, each)
        fpr_up = clopper_pearson_upper(int((scores_out >= t).sum()), scores_out.size, each)
        for a, b in ((fnr_up, fpr_up), (fpr_up, fnr_up)):
            if b > 0 and 1 - delta - a > 0 and math.log((1 - delta - a) / b) > best:
                best, best_t = math.log((1 - delta - a) / b), float(t)
    return best, best_t


def audit_multi_run(config: TrainConfig, runs: int = 40, confidence: float = 0.95,
                    wrap_release: Callable[[Release], Release] | None = None, data=None,
                    log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The classical white-box audit for small models: ``runs`` trainings with one Dirac canary on
    a fixed coordinate, ``+Delta/2`` in the even runs and ``-Delta/2`` in the odd ones (neighbours,
    as in the one-run audit), scored the same way; bound by :func:`multi_run_lower_bound`. It
    cross-checks the one-run bound at the price of ``runs`` trainings."""
    _check_white_box(config)
    if runs < 2:
        raise TrainingConfigError(f"--runs must be >= 2, got {runs}")
    began = time.perf_counter()
    coordinate: np.ndarray | None = None
    scores: dict[bool, list[float]] = {True: [], False: []}
    claimed = float("inf")
    for run in range(runs):
        heads = run % 2 == 0
        trainer = Trainer(config, data=data, progress=False, log=log or (lambda m: None))
        method = trainer.method
        if coordinate is None:
            coordinate = np.array([int(SecureGenerator().uniform(1)[0] * method.dimension)])
        rate = config.batch_size / len(trainer.train_split)
        planted = DiracCanaries(coordinate, np.array([heads]), method.sensitivity / 2, rate)
        record = _train_with(trainer, planted, wrap_release, None)
        scores[heads].append(float(planted.scores[0]))
        claimed = record["final"]["epsilon"]
    bound, threshold = multi_run_lower_bound(np.array(scores[True]), np.array(scores[False]), config.delta, confidence)
    return {
        "method": config.method, "noise_source": config.noise_source, "threat_model": "white-box, multi-run",
        "claimed_epsilon": claimed, "delta": config.delta, "confidence": confidence, "epsilon_lower_bound": bound,
        "threshold": threshold, "runs": runs, "canaries": 1, "time_s": time.perf_counter() - began,
        "scores": {"heads": scores[True], "tails": scores[False]},
    }


def neighboring_of(config: TrainConfig) -> str:
    """The relation the method's claim is made under (dp-sgd: by its sampling)."""
    if config.method == "dp-sgd":
        return "add_remove" if (config.sampling or "poisson") == "poisson" else "replace_one"
    return getattr(METHODS[config.method], "neighboring", "add_remove")


def input_canaries(count: int, features: int, classes: int, generator: SecureGenerator) -> Split:
    """``count`` images of uniform random pixels in [0, 1] with uniform random labels."""
    x = generator.uniform(count * features).reshape(count, features)
    y = np.minimum((generator.uniform(count) * classes).astype(np.int64), classes - 1)
    return Split(torch.from_numpy(x).float(), torch.from_numpy(y))


def audit_black_box(config: TrainConfig, canaries: int = 1000, confidence: float = 0.95,
                    guess_counts: tuple[int, ...] = (10, 25, 50, 100, 200, 400), data: Dataset | None = None,
                    log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """One-run black-box audit: input canaries scored by the final model's loss.

    Canary ``i`` is an image of uniform random pixels with a random label, in the training set
    with probability 1/2 (secret coin). Under add/remove the other choice is its absence; under
    replace-one (the dataset size is fixed) it is the same image with another label, so the two
    datasets are neighbours either way. The training goes through the public trainer unchanged;
    the auditor sees only the final model and scores ``-loss(x_i, y_i)`` (high: guessed included),
    then the bound is :func:`best_lower_bound`'s."""
    if not METHODS[config.method].private:
        raise TrainingConfigError(f"method {config.method!r} is not private; there is no claim to audit")
    if canaries < 2:
        raise TrainingConfigError(f"--canaries must be >= 2, got {canaries}")
    began = time.perf_counter()
    raw = data or load_dataset(config.dataset, config.data_dir, config.validation_fraction, config.seed)
    real = raw.train if config.train_limit is None else Split(raw.train.x[:config.train_limit],
                                                               raw.train.y[:config.train_limit])
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
    audited = Dataset(raw.name, train, raw.validation, raw.test)
    trainer = Trainer(config.with_(train_limit=None), data=audited, progress=False, log=log or (lambda m: None))
    try:
        record = trainer.run()
    finally:
        trainer.close()
    scaled = scale_inputs(Dataset(raw.name, probes, probes, probes), config.inputs, reference=train).train
    with torch.no_grad():
        model_device = next(trainer.model.parameters()).device
        logits = trainer.model(scaled.x.to(model_device)).cpu()
        losses = torch.nn.functional.cross_entropy(logits, scaled.y, reduction="none")
    scores = (-losses).double().numpy()
    final = record["final"]
    result = best_lower_bound(scores, heads, config.delta, confidence, guess_counts)
    return {
        "method": config.method, "noise_source": config.noise_source,
        "threat_model": "black-box, input canaries scored by the final model's loss", "neighboring": neighboring,
        "claimed_epsilon": final.get("epsilon", float("inf")), "delta": config.delta, "confidence": confidence,
        **result, "canaries": canaries, "steps": final["steps"], "test_accuracy": final["test_accuracy"],
        "time_s": time.perf_counter() - began,
        "scores": {"heads": scores[heads].tolist(), "tails": scores[~heads].tolist()},
    }


def plot_audit(result: dict[str, Any], path: str) -> None:
    """Histograms of the heads and tails canaries' scores, with the bound in the title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 4))
    bins = 40
    axis.hist(result["scores"]["heads"], bins=bins, alpha=0.6, label="canary included (+)")
    axis.hist(result["scores"]["tails"], bins=bins, alpha=0.6, label="canary left out or relabelled (-)")
    black_box = result["threat_model"].startswith("black-box")
    axis.set_xlabel("score: minus the final model's loss on the canary" if black_box
                    else "score: sum of released values at the canary's coordinate")
    axis.set_ylabel("canaries")
    axis.set_title(f"{result['method']} ({result['noise_source']}): claimed eps {result['claimed_epsilon']:.3g}, "
                   f"audit >= {result['epsilon_lower_bound']:.3g} at {result['confidence']:.0%}", fontsize=9)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
