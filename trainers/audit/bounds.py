"""The audit's statistics: the one-run bound of Steinke, Nasr and Jagielski (2023, Theorem 3.3
with the delta term of Appendix D), the multi-run bound, and the Gaussian-DP estimate of Nasr et al.
(2023). See :mod:`trainers.audit`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import optimize, stats

from ..core.errors import TrainingConfigError

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


def best_lower_bound(
    scores: np.ndarray,
    heads: np.ndarray,
    delta: float,
    confidence: float,
    guess_counts: tuple[int, ...],
    tests: int | None = None,
) -> dict[str, Any]:
    """Guess heads for the ``k`` highest and tails for the ``k`` lowest scores, for each ``k``; the
    best bound with the confidence split over ``tests`` (default: the counts tried; Bonferroni)."""
    m = len(scores)
    order = np.argsort(scores, kind="stable")
    counts = _guess_counts(m, guess_counts)
    split = 1 - (1 - confidence) / (tests or len(counts))
    best = {"epsilon_lower_bound": 0.0, "guesses": 0, "correct": 0}
    for k in counts:
        guessed_heads, guessed_tails = order[m - k :], order[:k]
        correct = int(heads[guessed_heads].sum() + (~heads[guessed_tails]).sum())
        bound = epsilon_lower_bound(m, 2 * k, correct, delta, split)
        if bound > best["epsilon_lower_bound"] or best["guesses"] == 0:
            best = {"epsilon_lower_bound": bound, "guesses": 2 * k, "correct": correct}
    return best


def best_over_kinds(
    scores: dict[str, np.ndarray], heads: np.ndarray, delta: float, confidence: float, guess_counts: tuple[int, ...]
) -> dict[str, Any]:
    """:func:`best_lower_bound` for every score kind, the confidence split (Bonferroni) across all
    the (kind, guess count) pairs tried; the best kind's figures plus each kind's bound."""
    tests = len(scores) * len(_guess_counts(len(heads), guess_counts))
    per_kind = {kind: best_lower_bound(s, heads, delta, confidence, guess_counts, tests) for kind, s in scores.items()}
    kind = max(per_kind, key=lambda k: per_kind[k]["epsilon_lower_bound"])
    return {
        **per_kind[kind],
        "score_kind": kind,
        "bonferroni_tests": tests,
        "by_score_kind": {k: v["epsilon_lower_bound"] for k, v in per_kind.items()},
    }


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


def gdp_mu_lower_bound(
    scores_in: np.ndarray, scores_out: np.ndarray, confidence: float, levels: tuple[float, ...] = GDP_LEVELS
) -> tuple[float, float | None]:
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


def gdp_epsilon_estimate(
    scores: dict[str, np.ndarray], heads: np.ndarray, delta: float, confidence: float
) -> dict[str, Any]:
    """:func:`gdp_mu_lower_bound` for each score kind (confidence split over the kinds), converted
    to epsilon at ``delta`` by :func:`gdp_epsilon`. Assumes a Gaussian trade-off and treats the
    canaries as independent trials (Nasr et al. 2023); not a proof, unlike the Steinke bound."""
    split = 1 - (1 - confidence) / len(scores)
    found = {kind: gdp_mu_lower_bound(s[heads], s[~heads], split) for kind, s in scores.items()}
    kind = max(found, key=lambda k: found[k][0])
    mu, threshold = found[kind]
    return {
        "gdp_epsilon_estimate": gdp_epsilon(mu, delta),
        "gdp_mu_lower_bound": mu,
        "gdp_threshold": threshold,
        "gdp_score_kind": kind,
        "gdp_assumption": "assumes a Gaussian trade-off (mu-GDP) and independent canaries",
    }


# -- measured sensitivity ----------------------------------------------------------------------


def multi_run_lower_bound(
    scores_in: np.ndarray, scores_out: np.ndarray, delta: float, confidence: float
) -> tuple[float, float | None]:
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
