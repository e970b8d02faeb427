"""Renyi accounting of the lattice mechanism with ANY computed integer noise PMF (digitized reads).

The release is ``R(x) + K`` per coordinate (``R`` the unbiased randomized rounding of
:mod:`.rounding`, ``K`` i.i.d. with law ``p``, e.g. :func:`.digitized.difference_pmf`). A clipped
camera gives ``p`` a bounded support, so every shifted ``p`` has mass where ``p`` has none and the
Renyi divergence is infinite. The route here:

**(4) Accounted law.** ``p_bar = (1 - eps0) p 1_W / p(W) + eps0 nu`` with ``W = {n : p_hat(n) >=``
:data:`WINDOW_FLOOR` ``}``, ``eps0 =`` :data:`MIX` and ``nu`` the two-sided geometric law
``nu(n) ~ exp(-|n| / beta)``, ``beta = 1000 max(1, sd K)``: full support, so shifts of ``p_bar`` are
absolutely continuous, and ``TV(p, p_bar) <= tau = p(W^c) + eps0`` with ``p(W^c) <= (1 + rel)
sum_{W^c} p_hat + span * abs`` (:mod:`.digitized`'s error bounds).

**(5) Coupling lemma.** If the run with noise ``p_bar`` is ``(eps, delta')``-DP and each of the ``N``
noise values of the real run is coupled with one of ``p_bar`` (``P(differ) <= tau``), then the real
run is ``(eps, delta' + (1 + e^eps) N tau)``-DP: ``P[M(x) in S] <= P[M~(x) in S] + N tau <=
e^eps (P[M(x') in S] + N tau) + delta' + N tau``. The accountant charges it
(:meth:`.events.Event.total_variation`). Saturation that is likely makes ``p`` large at the edge
of its support, so ``p_bar``'s loss there is about ``log(p_edge / (eps0 nu))`` and the Renyi curve
below is large: a camera that clips is refused by the numbers, never by assumption.

**(6) Per-coordinate bound.** As :mod:`.rounding`'s theorem, with the Skellam law replaced by
``p_bar``: ``D_alpha(M(x') || M(x)) <= c^2 kappa_alpha`` for ``||x - x'||_2 <= c`` (integer alpha),
``kappa_alpha = max(near, far)`` where *near* (``|delta| <= 1``) is ``W / (alpha - 1)`` built from
``A = chi^2(P_1 || P_0)``, ``B`` and ``G_i`` of ``p_bar`` (:mod:`.rounding`, "Case |delta| <= 1"), and
*far* (``1 < |delta| <= c``) takes the exact ``E(s) = max_{+-} D_alpha(p_bar(. -+ s) || p_bar)`` for
``s = 1 .. floor(c) + 1`` in the joint-convexity mixture over ``theta`` (:mod:`.rounding`, "Case
|delta| > 1"; no tail beyond ``c`` is needed since ``|delta_j| <= c``). Every sum is an upper bound:
numerators use ``p_hat (1 + rel) + abs``, denominators ``p_hat (1 - rel) - abs`` (``p(W) <= 1``), in
log space; outside the computed grid both laws are ``eps0 nu``, whose ratios are within
``exp(+-3 / beta)`` (near) or ``exp(+-s / beta)`` (far), and whose mass (``<= eps0``) is added with
those ratios.

**(7) Symmetric laws.** A difference of two i.i.d. counts is even, ``p(n) = p(-n)``
(``NoisePMF.symmetric``). When the computed support is symmetric about 0, the window ``W`` is taken
symmetric (an entry is inside only if its mirror is, the rest charged to ``tau`` as before), so
``p_bar`` is even too (``nu`` is), and each bound is replaced by the tighter of itself and its mirror's
(both bound the same value). Then the moment of shift ``-s`` is the moment of ``+s`` (substitute ``n ->
-n``: the same terms), and only ``+s`` is summed: half the work.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln, logsumexp

from .digitized import NoisePMF
from .events import PrivacyParameterError
from .far_bound import THETA_CELLS, far_bounds
from .rounding import MAX_ORDER, logsumexp_rows, near_bound

WINDOW_FLOOR = 1e-200
MIX = 1e-40


class AccountedPMF:
    """``p_bar`` of (4) on a grid, as log upper / lower bounds, and its coupling cost ``tau``."""

    def __init__(self, noise: NoisePMF, max_shift: int) -> None:
        p, support = noise.pmf, noise.support
        inside = p >= WINDOW_FLOOR
        self.symmetric = noise.symmetric and bool(support[0] == -support[-1])  # (7)
        if self.symmetric:
            inside &= inside[::-1]
        if not inside.any():
            raise PrivacyParameterError("the noise PMF has no entry above the window floor")
        outside_mass = (1 + noise.rel_err) * float(p[~inside].sum()) + noise.span * noise.abs_err
        self.tau = outside_mass + MIX
        if outside_mass >= 1e-6:
            raise PrivacyParameterError(f"the noise PMF leaves mass {outside_mass:.3g} outside its window")
        std = math.sqrt(float(np.sum(p * (support - np.sum(p * support)) ** 2)))
        self.beta = 1000.0 * max(1.0, std)
        self.margin = max_shift + 3
        lo_n, hi_n = int(support[inside][0]) - self.margin, int(support[inside][-1]) + self.margin
        self.offset = lo_n
        n = np.arange(lo_n, hi_n + 1)
        log_nu = math.log(MIX) + math.log(math.tanh(0.5 / self.beta)) - np.abs(n) / self.beta
        window = np.zeros(len(n), dtype=bool)
        hat = np.zeros(len(n))
        index = support[inside] - lo_n
        window[index], hat[index] = True, p[inside]
        rel, absolute = noise.rel_err, noise.abs_err
        with np.errstate(divide="ignore"):
            upper = np.log1p(-MIX) + np.log(hat * (1 + rel) + absolute) - math.log1p(-outside_mass)
            lower = np.log1p(-MIX) + np.log(np.maximum(hat * (1 - rel) - absolute, 0.0))
        self.log_hi = np.where(window, np.logaddexp(upper, log_nu), log_nu)
        self.log_lo = np.where(window, np.logaddexp(lower, log_nu), log_nu)
        if self.symmetric:  # the grid is symmetric too (lo_n = -hi_n): each bound and its mirror's
            self.log_hi = np.minimum(self.log_hi, self.log_hi[::-1])
            self.log_lo = np.maximum(self.log_lo, self.log_lo[::-1])

    def shifted(self, bound: np.ndarray, k: int, length: int, start: int) -> np.ndarray:
        """``bound(n - k)`` for ``n = offset + start .. offset + start + length - 1``."""
        return bound[start - k : start - k + length]

    def integer_shift_log_moment(self, alpha: int, s: int) -> float:
        """Upper bound on ``log sum_n p_bar(n - s)^alpha p_bar(n)^(1 - alpha)``."""
        length = len(self.log_hi) - abs(s)
        start = max(s, 0)
        terms = alpha * self.shifted(self.log_hi, s, length, start) + (1 - alpha) * self.log_lo[start : start + length]
        tail = math.log(MIX) + alpha * abs(s) / self.beta
        return float(np.logaddexp(logsumexp(terms), tail))

    def shift_log_moments(self, alphas: np.ndarray, s: int) -> np.ndarray:
        """:meth:`integer_shift_log_moment` at every order of ``alphas`` at once (one matrix per shift)."""
        length = len(self.log_hi) - abs(s)
        start = max(s, 0)
        base = self.log_lo[start : start + length]
        terms = np.multiply.outer(alphas, self.shifted(self.log_hi, s, length, start) - base)
        terms += base
        peak = terms.max(axis=1)  # finite: log_hi and log_lo are finite everywhere (nu has full support)
        terms -= peak[:, None]
        np.exp(terms, out=terms)
        tail = math.log(MIX) + alphas * abs(s) / self.beta
        moments: np.ndarray = np.logaddexp(peak + np.log(terms.sum(axis=1)), tail)
        return moments

    def near_terms(self) -> tuple[float, float, np.ndarray]:
        """Upper bounds on ``A``, ``B`` and ``log G_i`` (``i = 0 .. MAX_ORDER``) of (6)."""
        start, length = 2, len(self.log_hi) - 3  # n with n - k on the grid for k = -1 .. 2
        i = np.arange(MAX_ORDER + 1, dtype=np.float64)
        log_a = log_b = -np.inf
        log_g = np.full(MAX_ORDER + 1, -np.inf)
        for e in (0, 1):
            w = self.shifted(self.log_hi, e, length, start)
            den_lo, den_hi = self.shifted(self.log_lo, e, length, start), self.shifted(self.log_hi, e, length, start)
            with np.errstate(over="ignore"):
                hi = {k: np.exp(self.shifted(self.log_hi, k, length, start) - den_lo) for k in (-1, 0, 1, 2)}
                lo = {k: np.exp(self.shifted(self.log_lo, k, length, start) - den_hi) for k in (-1, 0, 1, 2)}
            first = np.maximum(hi[1] - lo[0], hi[0] - lo[1])
            second = np.maximum.reduce(
                [
                    hi[2] - 2 * lo[1] + hi[0],
                    2 * hi[1] - lo[2] - lo[0],
                    hi[1] - 2 * lo[0] + hi[-1],
                    2 * hi[0] - lo[1] - lo[-1],
                ]
            )
            with np.errstate(divide="ignore", invalid="ignore"):
                log_first, log_second = np.log(np.abs(first)), np.log(np.abs(second))
                log_h = np.log(np.abs(first) + np.abs(second))
            log_a = max(log_a, float(logsumexp_rows((w + 2 * log_first)[None, :])[0]))
            log_b = max(log_b, float(logsumexp_rows((w + 2 * log_second)[None, :])[0]))
            log_g = np.maximum(log_g, logsumexp_rows(w[None, :] + i[:, None] * log_h[None, :]))
        spread = math.exp(3 / self.beta) - math.exp(-3 / self.beta)  # ratios of nu off the grid
        log_tail = math.log(MIX)
        a = math.exp(log_a) + math.exp(log_tail) * spread**2
        b = math.exp(log_b) + math.exp(log_tail) * (4 * spread) ** 2
        log_g = np.logaddexp(log_g, log_tail + i * math.log(5 * spread))
        return a, b, log_g


def _near(alpha: int, terms: tuple[float, float, np.ndarray]) -> float:
    """The near bound at one order: the per-order reference of :func:`.rounding.near_bound`."""
    a, b, log_g = terms
    second = math.comb(alpha, 2) * (math.sqrt(a) + math.sqrt(b)) ** 2
    higher = 0.0
    if alpha >= 3:
        i = np.arange(3, alpha + 1)
        log_binom = gammaln(alpha + 1) - gammaln(i + 1) - gammaln(alpha - i + 1)
        with np.errstate(over="ignore"):
            higher = float(np.exp(logsumexp(log_binom + log_g[i])))
    return (second + higher) / (alpha - 1)


def _far(alpha: int, shift_rdp: np.ndarray) -> float:
    """``max over s, theta`` of the mixture bound over ``(s + theta)^2`` (``shift_rdp[s] = E(s)``) at one
    order, on the full grid: the per-order reference of :func:`.far_bound.far_bounds`."""
    shifts = np.arange(1, len(shift_rdp) - 1, dtype=np.float64)[:, None]
    if shifts.size == 0:
        return 0.0
    edges = np.linspace(0.0, 1.0, THETA_CELLS + 1)[None, :]
    low, high = edges[:, :-1], edges[:, 1:]
    e_s = (alpha - 1) * shift_rdp[1:-1, None]
    e_next = (alpha - 1) * shift_rdp[2:, None]
    with np.errstate(divide="ignore"):
        numerator = np.logaddexp(np.log1p(-high) + e_s, np.log(high) + e_next) / (alpha - 1)
    return float(np.max(numerator / (shifts + low) ** 2))


def pmf_coefficients(noise: NoisePMF, max_shift: int) -> tuple[np.ndarray, float]:
    """``kappa_alpha`` of (6) for ``alpha = 0 .. MAX_ORDER`` (inf below 2), for per-coordinate shifts
    up to ``max_shift + theta`` (``theta < 1``), and the coupling cost ``tau`` of (4)."""
    model = AccountedPMF(noise, max_shift)
    terms = model.near_terms()
    alphas = np.arange(2, MAX_ORDER + 1, dtype=np.float64)
    shift_rdp = np.zeros((len(alphas), max_shift + 2))  # row alpha - 2: E(s) at s = 0 .. max_shift + 1
    for s in range(1, max_shift + 2):
        moment = model.shift_log_moments(alphas, s)
        if not model.symmetric:  # (7): a symmetric law's -s moment is its +s moment
            moment = np.maximum(moment, model.shift_log_moments(alphas, -s))
        shift_rdp[:, s] = np.maximum(moment, 0.0) / (alphas - 1)
    kappa = np.full(MAX_ORDER + 1, np.inf)
    kappa[2:] = np.maximum(near_bound(alphas, *terms), far_bounds(alphas, shift_rdp))
    return kappa, model.tau
