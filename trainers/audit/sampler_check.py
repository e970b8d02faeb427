"""The sampler, driven for many steps through the run's own :class:`~trainers.core.sampling.Sampler`
and held against the sampling rate the ledger charges (see :mod:`trainers.audit.inspector`):
overall inclusion rate, each example's inclusion count (binomial), co-inclusion of neighbouring
examples, and independence of an example's inclusion from one step to the next."""

from __future__ import annotations

import numpy as np
from scipy import stats

from ..core.sampling import Sampler
from .noise_checks import Finding, correlation


def inclusion_matrix(sampler: Sampler, steps: int) -> np.ndarray:
    """``(steps, N)`` booleans: whether example ``i`` is in the batch of step ``t``, the batches
    drawn by ``sampler.batch`` over consecutive epochs (the run's own draws)."""
    per_epoch = sampler.steps_per_epoch
    matrix = np.zeros((steps, sampler.dataset_size), dtype=bool)
    for t in range(steps):
        indices = sampler.batch(t // per_epoch, t % per_epoch)
        matrix[t, np.asarray(indices.cpu(), dtype=np.int64)] = True
    return matrix


def _binomial_two_sided(count: int, trials: int, rate: float) -> float:
    if rate >= 1:
        return 1.0 if count == trials else 0.0
    return float(stats.binomtest(int(count), int(trials), rate).pvalue)


def check_sampler(sampler: Sampler, charged_rate: float, steps: int = 400) -> list[Finding]:
    """Findings for ``sampler`` against ``charged_rate`` (the ledger's ``q``, ``m / N`` for
    fixed-size batches): the overall rate, the per-example counts (dispersion chi-square and the
    most extreme example, Bonferroni over the examples), co-inclusion of examples ``i, i + 1``
    against ``q^2`` (Poisson) or ``m (m - 1) / (N (N - 1))`` (fixed size), and step-to-step dependence."""
    name = f"sampler ({sampler.kind})"
    matrix = inclusion_matrix(sampler, steps)
    n, q = matrix.shape[1], float(charged_rate)
    counts = matrix.sum(axis=0)
    rows = [
        Finding(
            name,
            "inclusion rate",
            float(counts.sum() / (steps * n)),
            q,
            f"binomial, {steps} steps x {n}",
            _binomial_two_sided(int(counts.sum()), steps * n, q),
        )
    ]
    if 0 < q < 1:
        expected = steps * q
        dispersion = float(np.sum((counts - expected) ** 2) / (expected * (1 - q)))
        dof = n - 1 if sampler.kind == "fixed" else n  # fixed size: the counts sum to steps * m
        dispersion *= dof / n
        rows.append(
            Finding(
                name,
                "per-example inclusion dispersion",
                dispersion / dof,
                1.0,
                f"chi-square, {dof} dof",
                float(stats.chi2.sf(dispersion, dof)),
            )
        )
        worst = int(np.argmax(np.abs(counts - expected)))
        rows.append(
            Finding(
                name,
                f"most extreme example's inclusion rate (example {worst})",
                float(counts[worst] / steps),
                q,
                f"binomial x {n} (Bonferroni)",
                min(1.0, n * _binomial_two_sided(int(counts[worst]), steps, q)),
            )
        )
        pair_rate = q * q if sampler.kind != "fixed" else q * (sampler.batch_size - 1) / max(n - 1, 1)
        together = int(np.sum(matrix[:, :-1] & matrix[:, 1:]))
        rows.append(
            Finding(
                name,
                "co-inclusion rate of examples i, i+1",
                together / (steps * (n - 1)),
                pair_rate,
                "binomial (approximate)",
                _binomial_two_sided(together, steps * (n - 1), pair_rate),
            )
        )
        rows.append(correlation(name, "inclusion correlation across steps", matrix[:-1], matrix[1:]))
    return rows
