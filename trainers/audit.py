"""Empirical lower bounds on epsilon: the one-run audit of Steinke, Nasr and Jagielski, "Privacy
Auditing with One (1) Training Run" (NeurIPS 2023), white-box, for every method whose noisy
release is one call ``method.release_update(u)`` on the flattened update ``u`` whose claimed L2
sensitivity is ``method.sensitivity`` (dp-dfa with software or device noise, dp-sgd); a Gaussian-DP
estimate after Nasr, Hayes, Steinke, Balle, Tramer, Jagielski, Carlini and Terzis, "Tight Auditing of
Differentially Private Machine Learning" (USENIX Security 2023); and a black-box audit.

**Bound** (Steinke et al. 2023, Theorem 3.3 with the delta term of Appendix D). ``m`` canaries each
get a secret fair coin; the auditor guesses ``r`` of the coins and gets ``v`` right. If the training
run is (epsilon, delta)-DP in each canary, then

    P[v' >= v] <= P[Binomial(r, e^eps / (1 + e^eps)) >= v]
                  + 2 m delta max_{i = 1..v} P[v > Binomial(r, e^eps / (1 + e^eps)) >= v - i] / i,

so the largest epsilon whose p-value is below ``1 - confidence`` is a lower bound on the run's true
epsilon at that confidence (:func:`epsilon_lower_bound`), with no assumption on the mechanism. Every
(score kind, guess count) pair tried shares the confidence by a Bonferroni split. With ``m``
canaries this bound is capped (about 5 for 1,000), so the audit also reports
:func:`gdp_epsilon_estimate` (Nasr et al. 2023), whose ceiling grows with the canaries but which
ASSUMES the run's trade-off curve is Gaussian.

**Sensitivity, measured** (:func:`measure_sensitivity`): before training, the largest change one
example makes to the pre-noise update is measured through the method's own code (its
``compute_gradients`` with the release replaced by a capture) on adversarial neighbouring batches
(real inputs with every label, inputs scaled up so the clips bind, random inputs). The canaries are
sized from this MEASURED value, not from the claimed ``method.sensitivity``, so a clip bug makes
them larger and a sensitivity bug leaves them their true size against smaller noise; a measured
value above the claimed one is reported as a finding by itself.

**Canaries** (white-box, the threat model the DP proofs cover: an example may contribute any update
of norm up to the sensitivity): canary ``i`` owns one coordinate ``j_i`` of the flattened update.
At each step ``t`` it joins with the batch's sampling rate; when it does it adds
``s_t c_i a e_{j_i}`` before the noise, with ``c_i = +-1`` its coin, ``s_t = (-1)^t`` a public
alternating pattern and ``a`` half the measured sensitivity (the two coins' updates differ by the
measured sensitivity: neighbours under replace-one; under add/remove the pair ``{+Delta/2, -Delta/2}``
gives the auditor exactly the evidence of ``{present with +Delta, absent}``). Two scores per canary,
from what the auditor sees of the release ``r_t``: ``sum`` = ``sum_t s_t r_t[j_i]`` (the matched
filter for fresh Gaussian noise) and ``difference`` = ``sum_{t >= 1} s_t (r_t - r_{t-1})[j_i]``, in
which noise repeated from step to step cancels while the canary's ``2 s_t c_i a`` adds up.

**What the auditor knows.** At sampling rate 1 the batch is the whole training set, so the rest
of the update ``u_t`` (a function of the data and of the model, which the earlier releases
determine) is known to the white-box adversary of the DP definition, and the scores are taken on
``r_t - u_t``: the canary plus the noise. Below rate 1 ``u_t`` depends on the secret batch and is not
subtracted.

**Soundness: inclusion is secret.** Every step is scored, whether or not the canary joined it
(the auditor never uses the batch inclusion, which the subsampled claim keeps secret). At sampling
rate 1 (batch size = training-set size) every canary joins every step and the claim has no
amplification; below rate 1 the canaries' inclusion is drawn independently per step at the batch's
rate (a Poisson stand-in for the without-replacement draw of a real example), a simplification
stated with every result.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
from scipy import optimize, stats

from opu_hal.secure_random import SecureGenerator

from .config import TrainConfig
from .data import Dataset, Split, load_dataset, scale_inputs, scaling_reference
from .errors import TrainingConfigError
from .loop import Trainer
from .methods import METHODS

SCORE_KINDS = ("sum", "difference")
GUESS_COUNTS = (10, 25, 50, 100, 200, 400, 1000, 2000, 5000, 10000)
#: Pooled-score quantiles tried as thresholds by the Gaussian-DP estimate (fixed before the data).
GDP_LEVELS = tuple(np.round(np.linspace(0.02, 0.98, 49), 2))


def p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """Probability of at least ``v`` correct guesses out of ``r`` under (epsilon, delta)-DP
    (Steinke et al. 2023, Theorem 3.3 and Appendix D)."""
    q = 1 / (1 + math.exp(-epsilon))
    tail = float(stats.binom.sf(v - 1, r, q))
    if delta == 0 or v == 0:
        return min(1.0, tail)
    i = np.arange(1, v + 1)
    below = np.cumsum(stats.binom.pmf(v - i, r, q))
    return min(1.0, tail + 2 * m * delta * float((below / i).max()))


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


def _guess_counts(m: int, guess_counts: tuple[int, ...]) -> list[int]:
    return [k for k in guess_counts if 2 * k <= m] or [m // 2]


def best_lower_bound(scores: np.ndarray, heads: np.ndarray, delta: float, confidence: float,
                     guess_counts: tuple[int, ...], tests: int | None = None) -> dict[str, Any]:
    """Guess heads for the ``k`` highest and tails for the ``k`` lowest scores, for each ``k``; the
    best bound with the confidence split over ``tests`` (default: the counts tried; Bonferroni)."""
    m = len(scores)
    order = np.argsort(scores, kind="stable")
    counts = _guess_counts(m, guess_counts)
    split = 1 - (1 - confidence) / (tests or len(counts))
    best = {"epsilon_lower_bound": 0.0, "guesses": 0, "correct": 0}
    for k in counts:
        guessed_heads, guessed_tails = order[m - k:], order[:k]
        correct = int(heads[guessed_heads].sum() + (~heads[guessed_tails]).sum())
        bound = epsilon_lower_bound(m, 2 * k, correct, delta, split)
        if bound > best["epsilon_lower_bound"] or best["guesses"] == 0:
            best = {"epsilon_lower_bound": bound, "guesses": 2 * k, "correct": correct}
    return best


def best_over_kinds(scores: dict[str, np.ndarray], heads: np.ndarray, delta: float, confidence: float,
                    guess_counts: tuple[int, ...]) -> dict[str, Any]:
    """:func:`best_lower_bound` for every score kind, the confidence split (Bonferroni) across all
    the (kind, guess count) pairs tried; the best kind's figures plus each kind's bound."""
    tests = len(scores) * len(_guess_counts(len(heads), guess_counts))
    per_kind = {kind: best_lower_bound(s, heads, delta, confidence, guess_counts, tests) for kind, s in scores.items()}
    kind = max(per_kind, key=lambda k: per_kind[k]["epsilon_lower_bound"])
    return {**per_kind[kind], "score_kind": kind, "bonferroni_tests": tests,
            "by_score_kind": {k: v["epsilon_lower_bound"] for k, v in per_kind.items()}}


# -- Gaussian-DP estimate (Nasr et al. 2023) -----------------------------------------------------
def clopper_pearson_upper(failures: int, trials: int, confidence: float) -> float:
    """One-sided upper confidence bound on a binomial rate (exact, Clopper-Pearson)."""
    if failures == trials:
        return 1.0
    return float(stats.beta.ppf(confidence, failures + 1, trials - failures))


def gdp_delta(epsilon: float, mu: float) -> float:
    """``delta(eps)`` of mu-GDP (Dong, Roth and Su 2022, Corollary 2.13):
    ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``."""
    return float(stats.norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * stats.norm.cdf(-epsilon / mu - mu / 2))


def gdp_epsilon(mu: float, delta: float) -> float:
    """The epsilon of mu-GDP at ``delta`` (0 when ``delta(0) <= delta``)."""
    if mu <= 0 or gdp_delta(0.0, mu) <= delta:
        return 0.0
    high = 1.0
    while gdp_delta(high, mu) > delta:
        high *= 2
    return float(optimize.brentq(lambda e: gdp_delta(e, mu) - delta, 0.0, high, xtol=1e-10))


def gdp_mu_lower_bound(scores_in: np.ndarray, scores_out: np.ndarray, confidence: float,
                       levels: tuple[float, ...] = GDP_LEVELS) -> tuple[float, float | None]:
    """Nasr et al. 2023: for a threshold ``t`` (guess "in" when ``score >= t``), Clopper-Pearson
    upper bounds on FPR and FNR give, IF the trade-off curve is Gaussian (mu-GDP), the lower bound
    ``mu >= Phi^-1(1 - FPR_up) - Phi^-1(FNR_up)``. Thresholds: the pooled scores' quantiles at
    ``levels``; the confidence is split over thresholds and both rates (Bonferroni).
    Returns ``(mu lower bound, threshold)``."""
    pooled = np.concatenate([scores_in, scores_out])
    thresholds = np.unique(np.quantile(pooled, levels))
    each = 1.0 - (1.0 - confidence) / (2 * thresholds.size)
    best, best_t = 0.0, None
    for t in thresholds:
        fnr_up = clopper_pearson_upper(int((scores_in < t).sum()), scores_in.size, each)
        fpr_up = clopper_pearson_upper(int((scores_out >= t).sum()), scores_out.size, each)
        if fnr_up >= 1 or fpr_up >= 1:
            continue
        mu = float(stats.norm.ppf(1 - fpr_up) - stats.norm.ppf(fnr_up))
        if mu > best:
            best, best_t = mu, float(t)
    return best, best_t


def gdp_epsilon_estimate(scores: dict[str, np.ndarray], heads: np.ndarray, delta: float,
                         confidence: float) -> dict[str, Any]:
    """:func:`gdp_mu_lower_bound` for each score kind (confidence split over the kinds), converted
    to epsilon at ``delta`` by :func:`gdp_epsilon`. Assumes a Gaussian trade-off and treats the
    canaries as independent trials (Nasr et al. 2023); not a proof, unlike the Steinke bound."""
    split = 1 - (1 - confidence) / len(scores)
    found = {kind: gdp_mu_lower_bound(s[heads], s[~heads], split) for kind, s in scores.items()}
    kind = max(found, key=lambda k: found[k][0])
    mu, threshold = found[kind]
    return {"gdp_epsilon_estimate": gdp_epsilon(mu, delta), "gdp_mu_lower_bound": mu, "gdp_threshold": threshold,
            "gdp_score_kind": kind, "gdp_assumption": "assumes a Gaussian trade-off (mu-GDP) and independent canaries"}


# -- measured sensitivity ----------------------------------------------------------------------
def probe_inputs(train: Split, n_real: int, n_random: int, scales: tuple[float, ...],
                 generator: SecureGenerator) -> torch.Tensor:
    """Adversarial probe inputs: real training inputs at every scale in ``scales`` (large scales
    make the input and gradient clips bind), uniform and Gaussian random inputs at those scales,
    and the zero input."""
    real = train.x[:n_real].detach().cpu().float()
    features = real.shape[1]
    uniform = torch.from_numpy(generator.uniform(n_random * features).reshape(n_random, features)).float()
    normal = generator.standard_normal(n_random * features).view(n_random, features).float().cpu()
    batches = [s * part for s in scales for part in (real, uniform, normal)]
    return torch.cat([*batches, torch.zeros(1, features)])


def _max_pairwise_distance(updates: torch.Tensor) -> float:
    """``max_{i,j} ||U_i - U_j||`` over the rows (float64 Gram matrix of the centred rows)."""
    centred = (updates - updates[0]).double()
    gram = centred @ centred.T
    norms = gram.diagonal()
    squared = norms[:, None] + norms[None, :] - 2 * gram
    return float(squared.clamp_min(0).max().sqrt())


def measure_sensitivity(trainer: Trainer, n_real: int = 8, n_random: int = 4, base_size: int = 4,
                        scales: tuple[float, ...] = (1.0, 10.0, 100.0)) -> dict[str, Any]:
    """The largest change one example makes to the pre-noise update, measured through
    ``trainer.method.compute_gradients`` with ``release_update`` replaced by a capture of ``u``.

    Each probe input (:func:`probe_inputs`) is tried with every label (wrong labels included).
    Replace-one: batch ``base + probe_i`` for every probe, max over pairs ``||U_i - U_j||``.
    Add/remove: ``||U(base + probe_i) - U(base)||``. ``base`` is the first ``base_size`` training
    examples. The model, its gradients and the optimizer are restored (the method's secure
    generator may have advanced; nothing it releases depends on that). The measured value is a
    lower bound on the true sensitivity at the model's initial state, so canaries of this size are
    within what the claim must cover."""
    method, split = trainer.method, trainer.train_split
    neighboring = getattr(method, "neighboring", "add_remove")
    params = list(trainer.model.parameters())
    saved_state = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    saved_grads = [None if p.grad is None else p.grad.detach().clone() for p in params]
    inputs = probe_inputs(split, n_real, n_random, scales, SecureGenerator()).to(split.x.device)
    classes = int(trainer.data.n_classes)
    base_x, base_y = split.x[:base_size], split.y[:base_size]
    captured: list[torch.Tensor] = []
    had_own = "release_update" in vars(method)
    original = method.release_update

    def capture(u: torch.Tensor) -> torch.Tensor:
        captured.append(u.detach().flatten().cpu().float().clone())
        return u

    method.release_update = capture  # type: ignore[method-assign]
    try:
        with torch.enable_grad():
            if neighboring != "replace_one":
                method.compute_gradients(base_x, base_y)
            for x in inputs:
                for label in range(classes):
                    y = torch.tensor([label], device=split.y.device, dtype=split.y.dtype)
                    method.compute_gradients(torch.cat([base_x, x[None]]), torch.cat([base_y, y]))
    finally:
        if had_own:
            method.release_update = original  # type: ignore[method-assign]
        else:
            del method.release_update
        for p, g in zip(params, saved_grads):
            p.grad = g
    updates = torch.stack(captured)
    if neighboring == "replace_one":
        measured = _max_pairwise_distance(updates)
    else:
        measured = float((updates[1:] - updates[0]).double().norm(dim=1).max())
    for key, value in trainer.model.state_dict().items():
        if not torch.equal(value, saved_state[key]):
            raise RuntimeError(f"measuring the sensitivity changed the model ({key}); the audit would be void")
    claimed = float(method.sensitivity)
    return {"measured_sensitivity": measured, "claimed_sensitivity": claimed, "neighboring": neighboring,
            "sensitivity_probes": len(captured), "sensitivity_exceeds_claim": measured > claimed * (1 + 1e-6)}


# -- canaries ----------------------------------------------------------------------------------
@dataclass
class DiracCanaries:
    """White-box canaries on a flattened update (module docstring): ``+-a`` at their coordinates,
    alternating sign from step to step, scored at every step (inclusion stays secret)."""

    coordinates: np.ndarray
    heads: np.ndarray
    magnitude: float
    sampling_rate: float
    generator: SecureGenerator = field(default_factory=SecureGenerator)
    scores: dict[str, np.ndarray] = field(init=False)
    joined: np.ndarray = field(init=False)
    steps: int = field(default=0, init=False)
    _previous: np.ndarray | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.scores = {kind: np.zeros(len(self.coordinates)) for kind in SCORE_KINDS}
        self.joined = np.zeros(len(self.coordinates), dtype=np.int64)

    @classmethod
    def draw(cls, count: int, dimension: int, magnitude: float, sampling_rate: float) -> "DiracCanaries":
        generator = SecureGenerator()
        if count > dimension:
            raise TrainingConfigError(f"--canaries {count}: the update has only {dimension} coordinates")
        coordinates = np.argsort(generator.uniform(dimension))[:count]
        heads = generator.uniform(count) < 0.5
        return cls(coordinates, heads, magnitude, sampling_rate, generator)

    @property
    def pattern(self) -> float:
        """The public sign ``s_t = (-1)^t`` of the current step."""
        return -1.0 if self.steps % 2 else 1.0

    def insert(self, update: torch.Tensor) -> torch.Tensor:
        """The update with this step's joining canaries added (before the noise)."""
        joining = (self.generator.uniform(len(self.coordinates)) < self.sampling_rate
                   if self.sampling_rate < 1 else np.ones(len(self.coordinates), dtype=bool))
        self.joined += joining
        signs = np.where(self.heads, 1.0, -1.0) * joining * self.magnitude * self.pattern
        update = update.clone()
        index = torch.from_numpy(self.coordinates).to(update.device)
        update[index] += torch.from_numpy(signs).to(update.device, update.dtype)
        return update

    def observe(self, seen: torch.Tensor) -> None:
        """Score what the auditor sees of this step's release at every canary's coordinate."""
        values = seen.detach().flatten().cpu().double().numpy()[self.coordinates]
        self.scores["sum"] += self.pattern * values
        if self._previous is not None:
            self.scores["difference"] += self.pattern * (values - self._previous)
        self._previous = values
        self.steps += 1


WHITE_BOX_METHODS = ("dp-dfa", "dp-sgd")


Release = Callable[[torch.Tensor], torch.Tensor]


def _check_white_box(config: TrainConfig) -> None:
    if config.method not in WHITE_BOX_METHODS and not any(
            issubclass(METHODS[config.method], METHODS[name]) for name in WHITE_BOX_METHODS):
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
        seen = released - update if planted.sampling_rate >= 1 else released
        planted.observe(seen if attacker_view is None else attacker_view(seen, steps[0]))
        steps[0] += 1
        return released

    method.release_update = audited  # type: ignore[method-assign]
    try:
        return trainer.run()
    finally:
        trainer.close()


def _sampling_note(rate: float) -> str:
    if rate >= 1:
        return "rate 1: every canary joins every step (no secret inclusion, the claim has no amplification)"
    return (f"rate {rate:.4g}: inclusion drawn independently per step (a Poisson stand-in) and kept secret: "
            "every step is scored")


def audit_white_box(config: TrainConfig, canaries: int = 1000, confidence: float = 0.95,
                    guess_counts: tuple[int, ...] = GUESS_COUNTS,
                    wrap_release: Callable[[Release], Release] | None = None,
                    attacker_view: Callable[[torch.Tensor, int], torch.Tensor] | None = None,
                    data=None, device=None, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Train ``config`` once with white-box canaries sized from the measured sensitivity
    (:func:`measure_sensitivity`); returns the audit record: the Steinke et al. 2023 bound
    (``epsilon_lower_bound``, assumption-free, the primary figure), the Gaussian-DP estimate of
    Nasr et al. 2023 (``gdp_epsilon_estimate``, assumes a Gaussian trade-off), the claimed and the
    measured sensitivity, and ``flagged`` with its ``findings``.

    ``wrap_release`` replaces the mechanism's release (tests use it to plant broken mechanisms while
    the accountant keeps claiming the nominal epsilon); ``attacker_view(seen, step)`` is what the
    auditor scores instead of ``seen``, the release less the known rest of the update at rate 1 and
    the release itself below it (e.g. ``seen`` minus noise rebuilt from a public seed)."""
    _check_white_box(config)
    if canaries < 2:
        raise TrainingConfigError(f"--canaries must be >= 2, got {canaries}")
    began = time.perf_counter()
    trainer = Trainer(config, data=data, device=device, progress=False, log=log or (lambda m: None))
    try:
        sensitivity = measure_sensitivity(trainer)
    except BaseException:
        trainer.close()
        raise
    rate = min(1.0, config.batch_size / len(trainer.train_split))
    planted = DiracCanaries.draw(canaries, trainer.method.dimension, sensitivity["measured_sensitivity"] / 2, rate)
    record = _train_with(trainer, planted, wrap_release, attacker_view)
    return _white_box_record(config, planted, record, sensitivity, confidence, guess_counts, began)


def _white_box_record(config: TrainConfig, planted: DiracCanaries, record: dict[str, Any],
                      sensitivity: dict[str, Any], confidence: float, guess_counts: tuple[int, ...],
                      began: float) -> dict[str, Any]:
    claimed = record["final"]["epsilon"]
    steinke = best_over_kinds(planted.scores, planted.heads, config.delta, confidence, guess_counts)
    gdp = gdp_epsilon_estimate(planted.scores, planted.heads, config.delta, confidence)
    findings = []
    if steinke["epsilon_lower_bound"] > claimed:
        findings.append("epsilon_lower_bound > claimed_epsilon")
    if sensitivity["sensitivity_exceeds_claim"]:
        findings.append("measured_sensitivity > claimed_sensitivity")
    best = planted.scores[steinke["score_kind"]]
    return {
        "method": config.method, "noise_source": config.noise_source,
        "threat_model": "white-box, Dirac canaries of the measured sensitivity",
        "claimed_epsilon": claimed, "delta": config.delta, "confidence": confidence,
        **steinke, **gdp, **sensitivity, "flagged": bool(findings), "findings": findings,
        "gdp_exceeds_claim": gdp["gdp_epsilon_estimate"] > claimed,
        "canaries": len(planted.heads), "canary_magnitude": planted.magnitude,
        "canary_sampling": _sampling_note(planted.sampling_rate), "sampling_rate": planted.sampling_rate,
        "canaries_never_sampled": int((planted.joined == 0).sum()), "steps": record["final"]["steps"],
        "test_accuracy": record["final"]["test_accuracy"], "time_s": time.perf_counter() - began,
        "scores": {"heads": best[planted.heads].tolist(), "tails": best[~planted.heads].tolist()},
    }


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
        "method": config.method, "noise_source": config.noise_source, "threat_model": "white-box, multi-run",
        "claimed_epsilon": claimed, "delta": config.delta, "confidence": confidence, "epsilon_lower_bound": bound,
        "threshold": threshold, "gdp_mu_lower_bound": mu, "gdp_epsilon_estimate": gdp_epsilon(mu, config.delta),
        "gdp_assumption": "assumes a Gaussian trade-off (mu-GDP)", **(sensitivity or {}), "runs": runs, "canaries": 1,
        "time_s": time.perf_counter() - began, "scores": {"heads": scores[True], "tails": scores[False]},
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
    reference = scaling_reference(raw, train, private=True)  # as the trainer scaled the audited run
    scaled = scale_inputs(Dataset(raw.name, probes, probes, probes), config.inputs, reference=reference).train
    with torch.no_grad():
        model_device = next(trainer.model.parameters()).device
        logits = trainer.model(scaled.x.to(model_device)).cpu()
        losses = torch.nn.functional.cross_entropy(logits, scaled.y, reduction="none")
    scores = (-losses).double().numpy()
    final = record["final"]
    result = best_lower_bound(scores, heads, config.delta, confidence, guess_counts)
    gdp = gdp_epsilon_estimate({"loss": scores}, heads, config.delta, confidence)
    return {
        "method": config.method, "noise_source": config.noise_source,
        "threat_model": "black-box, input canaries scored by the final model's loss", "neighboring": neighboring,
        "claimed_epsilon": final.get("epsilon", float("inf")), "delta": config.delta, "confidence": confidence,
        **result, **gdp, "canaries": canaries, "steps": final["steps"], "test_accuracy": final["test_accuracy"],
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
                    else f"score ({result.get('score_kind', 'sum')}): released values at the canary's coordinate")
    axis.set_ylabel("canaries")
    gdp = result.get("gdp_epsilon_estimate")
    axis.set_title(f"{result['method']} ({result['noise_source']}): claimed eps {result['claimed_epsilon']:.3g}, "
                   f"audit >= {result['epsilon_lower_bound']:.3g} at {result['confidence']:.0%}"
                   + ("" if gdp is None else f", GDP est. {gdp:.3g}"), fontsize=9)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
