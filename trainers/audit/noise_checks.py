"""Statistical checks of observed noise draws against the law the ledger charges (see
:mod:`trainers.audit.inspector`): variance, law (goodness of fit), lattice/discreteness, and
independence across steps and coordinates. Each returns :class:`Finding` rows with a p-value or a
rule; the inspector applies the multiple-testing correction."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class Finding:
    """One measured quantity of one mechanism held against what the ledger charges.

    ``p_value`` is the test's (``None`` for a deterministic rule, whose verdict is ``violated``);
    the inspector turns it into a verdict at its corrected level."""

    mechanism: str
    quantity: str
    measured: float
    charged: float
    test: str
    p_value: float | None = None
    violated: bool = False

    def verdict(self, level: float) -> bool:
        """Whether this finding flags the run at per-test level ``level``."""
        return self.violated if self.p_value is None else self.p_value < level


def variance_shortfall(mechanism: str, draws: np.ndarray, charged_std: float) -> Finding:
    """One-sided chi-square test that the noise's variance is below the charged ``charged_std^2``
    (too little noise is the privacy bug; more is only a utility cost). Centred at the known 0."""
    x = draws.astype(np.float64).ravel()
    n = x.size
    measured = float(math.sqrt(np.mean(x * x)))
    if charged_std <= 0:
        return Finding(mechanism, "noise std", measured, charged_std, "charged std must be > 0", None, True)
    statistic = float(np.sum(x * x) / charged_std**2)
    return Finding(
        mechanism,
        "noise std",
        measured,
        charged_std,
        f"chi-square lower tail, n={n}",
        float(stats.chi2.cdf(statistic, n)),
    )


def gaussian_fit(mechanism: str, draws: np.ndarray, charged_std: float, limit: int = 50_000) -> Finding:
    """Kolmogorov-Smirnov test of the draws divided by ``charged_std`` against N(0, 1): the
    accounted law, scale included (right variance, wrong law fails here)."""
    x = draws.astype(np.float64).ravel()[:limit] / max(charged_std, 1e-300)
    result = stats.kstest(x, "norm")
    return Finding(
        mechanism,
        "law (KS distance to the accounted Gaussian)",
        float(result.statistic),
        0.0,
        f"Kolmogorov-Smirnov, n={x.size}",
        float(result.pvalue),
    )


def continuity(mechanism: str, draws: np.ndarray, minimum_fraction: float = 0.5, limit: int = 50_000) -> Finding:
    """Rule: a continuous Gaussian's draws are (almost) all distinct; a lattice (noise rounded to a
    grid, Rademacher signs) shows as few distinct values. Flags a distinct fraction below
    ``minimum_fraction``."""
    x = draws.ravel()[:limit]
    fraction = float(np.unique(x).size / max(x.size, 1))
    return Finding(
        mechanism,
        "distinct values / draws",
        fraction,
        1.0,
        f"rule: >= {minimum_fraction} of {x.size} draws distinct",
        None,
        fraction < minimum_fraction,
    )


def on_integer_lattice(mechanism: str, counts: np.ndarray, tolerance: float = 1e-3) -> Finding:
    """Rule: device counts in lattice units are integers (the law the discrete event accounts), up to
    ``tolerance`` (a float32 release scaled back by ``gamma``; continuous noise sits 1/4 away on average)."""
    distance = float(np.max(np.abs(counts - np.round(counts)))) if counts.size else 0.0
    return Finding(
        mechanism,
        "distance to the integer lattice",
        distance,
        0.0,
        f"rule: <= {tolerance:g}",
        None,
        distance > tolerance,
    )


def skellam_fit(mechanism: str, counts: np.ndarray, limit: int = 200_000) -> Finding:
    """Chi-square of integer counts against Skellam(mu, mu) with ``mu`` fitted from their variance
    (one degree of freedom spent): the law of differences of Poisson photo-electron counts, of any
    mean at least the accounted one (the variance test holds it to the accounted mean)."""
    k = np.round(counts.astype(np.float64).ravel()[:limit]).astype(np.int64)
    mu = max(float(np.mean(k.astype(np.float64) ** 2)) / 2, 1e-9)
    low, high = int(k.min()), int(k.max())
    support = np.arange(low, high + 1)
    expected = stats.skellam.pmf(support, mu, mu) * k.size
    observed = np.bincount(k - low, minlength=support.size).astype(np.float64)
    expected[0] += stats.skellam.cdf(low - 1, mu, mu) * k.size
    expected[-1] += stats.skellam.sf(high, mu, mu) * k.size
    bins_o, bins_e, acc_o, acc_e = [], [], 0.0, 0.0
    for o, e in zip(observed, expected):  # pool neighbouring cells until each expects >= 5
        acc_o, acc_e = acc_o + o, acc_e + e
        if acc_e >= 5:
            bins_o.append(acc_o)
            bins_e.append(acc_e)
            acc_o = acc_e = 0.0
    if bins_e and acc_e:
        bins_o[-1] += acc_o
        bins_e[-1] += acc_e
    if len(bins_e) < 3:
        return Finding(mechanism, "law (chi-square to Skellam)", float("nan"), 0.0, "too few cells", None, True)
    observed, expected = np.array(bins_o), np.array(bins_e)
    statistic = float(np.sum((observed - expected) ** 2 / expected))
    dof = len(expected) - 2
    return Finding(
        mechanism,
        "law (chi-square to Skellam, per cell)",
        statistic / dof,
        1.0,
        f"chi-square, {dof} dof, n={k.size}",
        float(stats.chi2.sf(statistic, dof)),
    )


def correlation(mechanism: str, quantity: str, a: np.ndarray, b: np.ndarray) -> Finding:
    """Two-sided test of zero Pearson correlation between paired draws ``a`` and ``b`` (Fisher's
    z, ``sqrt(n - 3) atanh(r)`` standard normal under independence)."""
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    n = a.size
    if n < 4 or a.std() == 0 or b.std() == 0:
        # Constant draws: no noise at all, or noise identical everywhere; both are dependence.
        same = bool(n and np.allclose(a, b))
        return Finding(mechanism, quantity, 1.0 if same else 0.0, 0.0, "constant draws", None, same)
    r = float(np.corrcoef(a, b)[0, 1])
    z = math.sqrt(n - 3) * math.atanh(min(max(r, -0.999999), 0.999999))
    return Finding(mechanism, quantity, r, 0.0, f"Fisher z, n={n}", float(2 * stats.norm.sf(abs(z))))


def independence(mechanism: str, steps: np.ndarray) -> list[Finding]:
    """Correlation between consecutive steps' draws at the same coordinate, and between adjacent
    coordinates of the same step (``steps`` is ``(steps, coordinates)``)."""
    rows = []
    if steps.shape[0] >= 2:
        rows.append(correlation(mechanism, "correlation across steps", steps[:-1], steps[1:]))
    if steps.shape[1] >= 2:
        rows.append(correlation(mechanism, "correlation across coordinates", steps[:, :-1], steps[:, 1:]))
    return rows
