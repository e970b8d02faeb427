"""Likelihood-ratio scores of white-box canaries under the run's ACCOUNTED law (see
:mod:`trainers.audit.pipeline`): the log-likelihood ratio of what the auditor observed at a
canary's coordinate with the canary "heads" against "tails", if the mechanism did what its ledger
charges (Gaussian noise of the charged std, each example sampled at the charged rate).

Under that law the ratio is the Neyman-Pearson test of the two coins (the strongest score for a
sound run); a mechanism that departs from the law (an unamplified sampler, a release without
noise) is scored by the same formula and its canaries separate further. Any score is a function of
the output, so the Steinke et al. bound stays valid whatever law the run really follows.
"""

from __future__ import annotations

import numpy as np


def _log_mixture(x: np.ndarray, shift: np.ndarray, rate: float, std: float) -> np.ndarray:
    """``log[(1 - q) phi(x) + q phi(x - shift)] - log phi(x)`` with ``phi`` the ``N(0, std^2)`` density."""
    present = (x * shift - shift**2 / 2) / std**2
    if rate >= 1:
        return present
    return np.logaddexp(np.log1p(-rate), np.log(rate) + present)


def step_llr(x: np.ndarray, contribution: np.ndarray, rate: float, std: float, replace_one: bool) -> np.ndarray:
    """One step's log-likelihood ratio, heads against tails, of the observed values ``x`` at the
    canaries' coordinates, under Gaussian noise of std ``std`` and inclusion at rate ``rate``
    (Poisson: exact; fixed-size batches: the per-step marginal). ``contribution`` is what a heads
    canary adds when sampled; tails adds nothing (add/remove: the canary is absent) or its
    negative (replace-one: the canary's twin). The mixture over inclusion is the subsampled
    Gaussian's likelihood (Mironov, Talwar and Zhang 2019, Section 3)."""
    heads = _log_mixture(x, contribution, rate, std)
    if not replace_one:
        return heads
    return heads - _log_mixture(x, -contribution, rate, std)


def gaussian_llr(x: np.ndarray, contribution: np.ndarray, std: float, replace_one: bool) -> np.ndarray:
    """The log-likelihood ratio of one unsubsampled Gaussian release (the centring release): heads
    adds ``contribution``, tails nothing (add/remove) or ``-contribution`` (replace-one)."""
    return step_llr(x, contribution, 1.0, std, replace_one)


def empirical_llr(
    x: np.ndarray, contribution: np.ndarray, noise: np.ndarray, replace_one: bool, resolution: float = 50.0
) -> np.ndarray:
    """The log-likelihood ratio, heads against tails, under the noise law ESTIMATED from ``noise``
    (the same release's values at coordinates no canary owns, where the auditor knows the rest of the
    update: pure noise): a box kernel of half-width ``std(noise) / resolution``, one pseudo-count.
    Where the noise has the accounted law this approximates the Gaussian ratio; where it sits on a
    few values or a lattice (Rademacher noise, a Gaussian rounded to its std) the wrong coin lands
    between them and the canaries separate. A function of the release alone, so the bound stays valid."""
    ordered = np.sort(noise)
    width = float(ordered.std()) / resolution

    def log_density(y: np.ndarray) -> np.ndarray:
        count = np.searchsorted(ordered, y + width, "right") - np.searchsorted(ordered, y - width, "left")
        return np.log(count + 1.0)

    tails = x + contribution if replace_one else x
    return log_density(x - contribution) - log_density(tails)
