"""The exact law of digitized camera noise: one read in DN, sums of reads, differences of sums.

**Camera model** (the simulated camera's, :mod:`opu_hal.backends.simulated.camera`): one anchor-only
read of a pixel is

    e  ~ Poisson(lambda_e),   y = min(e, full_well) + N(0, sigma_r^2),
    DN = clip(round(y / g) + black, 0, 2^bits - 1)                                   (1)

so ``P(DN = d) = sum_e Pois(e; lambda_e) P(y in bin_d | e)`` with ``bin_d = [(d - black - 1/2) g,
(d - black + 1/2) g)``, the end bins ``d = 0`` and ``d = 2^bits - 1`` extended to -inf / +inf (the
clip atoms) (2). A count is the sum of ``n`` independent reads, a noise value the difference of two
counts, ``K = C_1 - C_2`` (3): symmetric, in DN, with the black level cancelled (not its clipping).

**Numerics, never optimistic** (:class:`NoisePMF`): (2) is evaluated in log space (the Poisson term
in Loader's form, :mod:`.poisson_log_pmf`, which does not cancel; ``log_ndtr`` once per bin edge);
every later step sums non-negative terms (direct convolution, no FFT), so each entry keeps a
*relative* error ``<= rel_err`` (each sum of ``L`` positive terms adds ``L 2^-53``, plus
:data:`_FUNC_REL` twice for the log-space evaluation: a few ulps of logs up to ``|log FLUSH| = 645``,
1.1e-13 each; checked against mpmath in ``tests/test_digitized_precision.py``). Entries below
:data:`FLUSH` are set to 0 after each step and products below the smallest normal double are lost;
both, and the Poisson mass outside the evaluated range, are charged to ``abs_err``, a bound on how
much any entry may exceed its computed value: ``p(n) <= p_hat(n) (1 + rel_err) + abs_err`` and
``p(n) >= p_hat(n) (1 - rel_err) - abs_err``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import numpy as np
from scipy.special import log_ndtr, logsumexp

from .events import PrivacyParameterError, _positive, is_count
from .poisson_log_pmf import log_poisson_pmf
from .rounding import logsumexp_rows

FLUSH = 1e-280  # entries below are dropped (charged to abs_err); far above the subnormal range
TINY = 2.3e-308  # a product below the smallest normal double may be lost
_FUNC_REL = 1e-12  # relative error allowed for the log-space terms of one entry: ulps of logs up to 645 in size
_POISSON_SIGMAS = 45.0  # Poisson range evaluated: mean +- 45 sd (+ 800), the rest charged to abs_err
MAX_READS = 4096
_BIN_SIGMAS = 37.0  # bins beyond 37 read-noise sd of an electron count get P(bin | e) <= Phi(-37) < 1e-299
SKIPPED_BIN = 1e-298  # charged to abs_err: bounds any skipped bin's mass (at most Phi(-37) summed over e)
_CHUNK = 64  # electron counts per chunk of (2): each chunk evaluates only the bins within reach of its counts
_ROW_FLOOR = -700.0  # electron counts below exp(-700) are left out of (2), their mass charged to abs_err


@dataclass(frozen=True)
class CameraRead:
    """The camera of one read (1): ``mean_e`` Poisson mean [e-], ``read_noise_e`` [e- rms],
    ``gain_e_per_dn`` [e-/DN], ``adc_bits``, ``black_level_dn`` [DN; a calibrated offset need not be an
    integer: the bins of (2) then sit at ``d - black +- 1/2``], ``full_well_e`` [e-]. A calibrated camera is
    a box of these (:mod:`.digitized_box`); one ``CameraRead`` is one point of it."""

    mean_e: float
    read_noise_e: float
    gain_e_per_dn: float
    adc_bits: int
    black_level_dn: float
    full_well_e: float

    def __post_init__(self) -> None:
        _positive("mean_e", self.mean_e, 1e7)
        _positive("read_noise_e", self.read_noise_e, 1e4)
        _positive("gain_e_per_dn", self.gain_e_per_dn, 1e4)
        _positive("full_well_e", self.full_well_e, 1e8)
        if not (is_count(self.adc_bits) and 6 <= self.adc_bits <= 16):
            raise PrivacyParameterError(f"adc_bits must be an integer in [6, 16], got {self.adc_bits!r}")
        black = self.black_level_dn
        if not (isinstance(black, (int, float)) and math.isfinite(black) and 0 <= black <= self.max_dn - 1):
            raise PrivacyParameterError(
                f"black_level_dn must be a number in [0, {self.max_dn - 1}] (a calibrated one need not be an integer: "
                f"the offset is added before rounding), got {black!r}"
            )

    @property
    def max_dn(self) -> int:
        return (1 << self.adc_bits) - 1

    @property
    def mean_dn(self) -> float:
        """Mean of one read before clipping, ``lambda_e / g + black``."""
        return self.mean_e / self.gain_e_per_dn + self.black_level_dn

    @property
    def variance_dn2(self) -> float:
        """Variance of one read before clipping: ``(lambda_e + sigma_r^2) / g^2 + 1/12`` (approx.)."""
        return (self.mean_e + self.read_noise_e**2) / self.gain_e_per_dn**2 + 1 / 12


@dataclass(frozen=True)
class NoisePMF:
    """``p_hat(offset + i) = pmf[i]``, with the error bounds of the module docstring; ``span`` is the
    number of integers where the true law may put mass (its finite support, computed part or not);
    ``symmetric``: the true law is known to be even, ``p(n) = p(-n)`` (a difference of i.i.d. counts)."""

    offset: int
    pmf: np.ndarray
    rel_err: float
    abs_err: float
    span: int
    symmetric: bool = False

    @property
    def support(self) -> np.ndarray:
        return np.arange(self.offset, self.offset + len(self.pmf))


def _log_edge_tails(z: np.ndarray) -> np.ndarray:
    """``log Phi(-|z|)``: the smaller tail at each standardized bin edge, the one value per edge that
    :func:`_log_bins` needs (either may be infinite)."""
    out: np.ndarray = log_ndtr(-np.abs(z))
    return out


def _log_bins(z: np.ndarray, tails: np.ndarray) -> np.ndarray:
    """``log(Phi(z[..., c + 1]) - Phi(z[..., c]))`` of every bin between consecutive standardized edges,
    without cancellation, from the edges' :func:`_log_edge_tails`: both edges in the upper tail use the
    symmetry ``Phi(b) - Phi(a) = Phi(-a) - Phi(-b)``, both in the lower tail ``Phi(b) - Phi(a)``, and a
    bin that straddles 0 is ``1 - Phi(a) - Phi(-b)`` (at least the larger half, > 0)."""
    low, high = z[..., :-1], z[..., 1:]
    tail_low, tail_high = tails[..., :-1], tails[..., 1:]
    upper = low >= 0
    big = np.where(upper, tail_low, tail_high)
    small = np.where(upper, tail_high, tail_low)
    with np.errstate(divide="ignore", invalid="ignore"):
        out: np.ndarray = big + np.log1p(-np.exp(small - big))
    straddle = (low < 0) & (high > 0)
    if straddle.any():
        out[straddle] = np.log(-np.expm1(np.logaddexp(tail_low[straddle], tail_high[straddle])))
    return out


def read_log_pmf(camera: CameraRead) -> tuple[np.ndarray, float]:
    """``log P(DN = d)`` for ``d = 0 .. 2^bits - 1`` (eq. 2) and the Poisson mass left out (charged to
    ``abs_err`` by the caller). Each chunk of electron counts is evaluated only on the bins within
    :data:`_BIN_SIGMAS` read-noise sd of it; the others' mass, below ``Phi(-37)`` per count, is charged
    as :data:`SKIPPED_BIN` (so a 16-bit camera costs its populated bins, not all 65 536); counts whose
    probability is below ``exp(-700)`` (:data:`_ROW_FLOOR`, 1e-304) are left out, at most that each."""
    lam, g, sigma = camera.mean_e, camera.gain_e_per_dn, camera.read_noise_e
    spread = _POISSON_SIGMAS * math.sqrt(lam) + 800
    bottom, top = max(0, int(math.floor(lam - spread))), int(math.ceil(lam + spread))
    full_well = int(math.floor(camera.full_well_e))
    e = np.arange(bottom, min(top, full_well) + 1, dtype=np.float64)
    log_pois = log_poisson_pmf(e, lam)
    # Mass outside the evaluated range: beyond mean +- spread the pmf falls geometrically, ratio < 1 - 1e-4.
    left_out = math.exp(min(0.0, float(log_pois[0]) + math.log(1e4))) if bottom > 0 else 0.0
    if full_well <= top:  # min(e, FW): the whole upper tail sits at FW (Poisson sf, log space)
        tail = np.arange(full_well, max(top, full_well) + 1, dtype=np.float64)
        log_tail = log_poisson_pmf(tail, lam)
        log_pois[-1] = float(logsumexp(log_tail))
        left_out += math.exp(min(0.0, float(log_tail[-1]) + math.log(1e4)))
    else:
        left_out += math.exp(min(0.0, float(log_pois[-1]) + math.log(1e4)))
    faint = log_pois < _ROW_FLOOR  # no bin they reach can hold more than exp(-700) of theirs: charged
    left_out += float(np.count_nonzero(faint)) * math.exp(_ROW_FLOOR)
    e, log_pois = e[~faint], log_pois[~faint]
    d = np.arange(camera.max_dn + 2, dtype=np.float64)  # bin d spans edges d and d + 1
    edges = (d - camera.black_level_dn - 0.5) * g
    edges[0], edges[-1] = -np.inf, np.inf
    out = np.full(len(d) - 1, -np.inf)
    reach = _BIN_SIGMAS * sigma  # a bin farther than this from every electron count of a chunk is skipped
    for start in range(0, len(e), _CHUNK):  # chunks of electron counts, each against the bins it reaches
        chunk = e[start : start + _CHUNK, None]
        first = int(np.clip(math.floor((chunk[0, 0] - reach) / g + camera.black_level_dn - 0.5), 0, len(out) - 1))
        last = int(np.clip(math.ceil((chunk[-1, 0] + reach) / g + camera.black_level_dn + 0.5), 0, len(out) - 1))
        z = (edges[None, first : last + 2] - chunk) / sigma
        log_bins = _log_bins(z, _log_edge_tails(z))
        cols = slice(first, last + 1)
        out[cols] = np.logaddexp(out[cols], logsumexp_rows((log_pois[start : start + _CHUNK, None] + log_bins).T))
    return out, left_out + SKIPPED_BIN


def _flush(values: np.ndarray) -> tuple[np.ndarray, float]:
    """Drop entries below :data:`FLUSH` and trim zero ends; returns the array and the mass dropped bound."""
    small = values < FLUSH
    dropped = float(np.count_nonzero(small & (values > 0))) * FLUSH
    values = np.where(small, 0.0, values)
    return values, dropped


def _trim(offset: int, values: np.ndarray) -> tuple[int, np.ndarray]:
    nonzero = np.flatnonzero(values)
    if nonzero.size == 0:
        raise PrivacyParameterError("the noise PMF underflowed everywhere")
    return offset + int(nonzero[0]), values[nonzero[0] : nonzero[-1] + 1].copy()


def _convolve(x: NoisePMF, y: NoisePMF) -> NoisePMF:
    """``x * y`` by direct summation of non-negative products; errors as in the module docstring."""
    values = np.convolve(x.pmf, y.pmf)  # direct method: every entry a sum of non-negative products
    terms = min(len(x.pmf), len(y.pmf))
    rel = (1 + x.rel_err) * (1 + y.rel_err) * (1 + terms * 2.0**-53) - 1
    # x's error spreads over y's mass (<= 1 + rel) and vice versa; lost products and the flush add up
    absolute = (
        x.abs_err * (1 + y.rel_err) + y.abs_err * (1 + x.rel_err) + x.abs_err * y.abs_err * len(y.pmf) + terms * TINY
    )
    values, dropped = _flush(values)
    offset, values = _trim(x.offset + y.offset, values)
    return NoisePMF(offset, values, rel, absolute + dropped, x.span + y.span - 1)


def read_pmf(camera: CameraRead) -> NoisePMF:
    """One read (eq. 2) as a :class:`NoisePMF` on ``0 .. 2^bits - 1``."""
    log_pmf, left_out = read_log_pmf(camera)
    values, dropped = _flush(np.exp(log_pmf))
    length = 2 * int(math.ceil(_POISSON_SIGMAS * math.sqrt(camera.mean_e) + 800)) + 1
    rel = length * 2.0**-53 + 2 * _FUNC_REL
    offset, values = _trim(0, values)
    return NoisePMF(offset, values, rel, left_out + dropped + length * TINY, camera.max_dn + 1)


@functools.lru_cache(maxsize=64)
def count_pmf(camera: CameraRead, reads: int) -> NoisePMF:
    """A count: the sum of ``reads`` independent reads (eq. 3), by binary powering."""
    if not (is_count(reads) and 1 <= reads <= MAX_READS):
        raise PrivacyParameterError(f"reads per count must be an integer in [1, {MAX_READS}], got {reads!r}")
    base, result = read_pmf(camera), None
    n = reads
    while n:
        if n & 1:
            result = base if result is None else _convolve(result, base)
        n >>= 1
        if n:
            base = _convolve(base, base)
    assert result is not None
    return result


@functools.lru_cache(maxsize=64)
def difference_pmf(camera: CameraRead, reads: int) -> NoisePMF:
    """``K = C_1 - C_2`` of two independent counts of ``reads`` reads each (eq. 3), in DN."""
    count = count_pmf(camera, reads)
    mirrored = NoisePMF(
        -(count.offset + len(count.pmf) - 1), count.pmf[::-1].copy(), count.rel_err, count.abs_err, count.span
    )
    return replace(_convolve(count, mirrored), symmetric=True)  # C_1 - C_2 of i.i.d. counts is even
