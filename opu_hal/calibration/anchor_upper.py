"""The anchor map's upper bounds without the normal approximation: a Chernoff bound on Poisson electrons
plus Gaussian read noise (:mod:`.anchor_map`).

Student's ``t`` fails on the upper side of right-skewed reads more often than it states (1.7x at 1e-5 for
a 20 e- pixel, ``python -m scripts.analysis.t_bound_skew``), so the upper bound uses the reads' model
instead. A read before rounding is ``Y = o + (E + N) / g`` in DN: ``E ~ Poisson(lambda)`` electrons (dark
signal included), ``N`` Gaussian read noise of variance ``sigma^2`` e^2, offset ``o``, gain ``g``. Poisson's
lower tail is sub-Gaussian with variance proxy its mean (``log E e^{-s(E - lambda)} = lambda (e^{-s} - 1 + s)
<= lambda s^2 / 2``), a Gaussian's with its variance, so the mean ``m_Y`` of ``F`` independent reads obeys

    P(m_Y <= mu_Y - z sqrt(v)) <= q,    z = sqrt(2 ln(1 / q) / F),    v = (lambda + sigma^2) / g^2,

with ``mu_Y = o + lambda / g``. The ADC rounds: ``m_Y <= m + 1/2`` for the rounded reads' mean ``m``. With
``w = mu_Y - O_lo`` (``O_lo`` a lower bound on the offset, ``g_lo`` on the gain, ``s^2`` an upper bound on
the read noise's variance in DN^2), ``lambda / g^2 = (mu_Y - o) / g <= w / g_lo``, so outside the events
of probability ``q``:

    w <= M + z sqrt(w / g_lo + s^2),  M = m + 1/2 - O_lo   =>   w <= M + (z^2 / g_lo + sqrt(z^4 / g_lo^2 +
    4 z^2 (M / g_lo + s^2))) / 2,

the larger root of the quadratic (the inequality's left side grows faster than its right beyond it), and
``lambda = g (mu_Y - o) <= g_hi w``. The read noise's bound comes from dark frames at the operating point
(:func:`read_variance_upper_dn2`: chi-square, exact for Gaussian dark reads, and it counts the dark shot
noise and the rounding too, which only widens ``v``) or, for a camera whose pixels share one read noise
(the simulator), from the calibration's pooled interval.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from .pixel_offset import QUANTIZATION_VAR_DN2, FrameMoments


def read_variance_upper_dn2(dark: FrameMoments, level: float) -> np.ndarray:
    """Each pixel's temporal dark variance (DN^2) bounded above at ``level``: ``(F - 1) s^2 / chi2_{F-1}(level)``
    (at least the rounding's 1/12); infinite where a dark read clipped."""
    bound = np.maximum(dark.var, QUANTIZATION_VAR_DN2) * (dark.frames - 1) / stats.chi2.ppf(level, dark.frames - 1)
    return np.where(dark.clipped, np.inf, bound)


def pooled_read_variance_dn2(read_noise_upper_e: float, gain_lower: float) -> float:
    """The read noise's variance in DN^2 from an upper bound on a read noise every pixel shares, with the
    rounding's 1/12."""
    return (read_noise_upper_e / gain_lower) ** 2 + QUANTIZATION_VAR_DN2


def chernoff_rise_dn(
    mean_dn: np.ndarray,
    frames: int,
    level: float,
    offset_low_dn: float | np.ndarray,
    gain_low: float,
    read_var_dn2: float | np.ndarray,
) -> np.ndarray:
    """The bound on ``w = mu_Y - O_lo`` (DN) of the module docstring at ``level`` per pixel, never below 0
    (``mu_Y >= o >= O_lo``); infinite where the offset is unknown (``O_lo = -inf``)."""
    if not (0 < level < 1 and frames >= 1 and gain_low > 0):
        raise ValueError(f"need 0 < level < 1, frames >= 1 and gain_low > 0, got {level}, {frames}, {gain_low}")
    z2 = 2 * math.log(1 / level) / frames
    with np.errstate(invalid="ignore"):
        head = np.asarray(mean_dn, dtype=np.float64) + 0.5 - offset_low_dn
        spread = np.maximum(head / gain_low + read_var_dn2, 0.0)
        rise = head + 0.5 * (z2 / gain_low + np.sqrt((z2 / gain_low) ** 2 + 4 * z2 * spread))
    return np.maximum(rise, 0.0)
