"""Each pixel's own full well, bounded from below by the brightest recorded flat series: what keeps a pixel whose
well fills early (a defect, or a low-capacity corner of the sensor) from being kept for privacy reads that would
clip there, when the calibration's clip level is a mean over the pixels (:mod:`.clip_level`).

A read of pixel ``j`` is ``round(min(e, W_j) / g) + o_j`` (EMVA 1288's linear model with the well's clip), so
its mean ``mu_j`` satisfies ``g (mu_j - o_j - 1/2) <= E[min(e, W_j)] <= W_j`` at any illumination, saturated
or not; reads clipped at the ADC top only lower ``mu_j``. With ``L_j = m_j - t s_j / sqrt(F)`` (one-sided
Student, ``F - 1`` degrees of freedom, at ``alpha / P`` over the ``P`` pixels) and the offset's upper bound
``O_hi_j`` (:mod:`.pixel_offset`),

    W_j >= g_lo max(0, L_j - O_hi_j - 1/2)

at every pixel at once with probability at least ``1 - alpha`` (given the offsets and the gain interval). A
pixel not yet full at the brightest level gets its signal there: smaller than its well, still a bound.
"""

from __future__ import annotations

import numpy as np

from .pixel_offset import FrameMoments

ROUNDING_DN = 0.5  # the ADC's rounding moves a read's mean by at most half a step


def full_well_lower_e(brightest: FrameMoments, offset_high_dn: np.ndarray, gain_low: float, alpha: float) -> np.ndarray:
    """``W_lo_j`` in e- per pixel (module docstring) from the moments of the brightest flat series; 0 where the
    pixel's offset is unbounded (a pixel clipped in the darks, never kept)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    low = brightest.mean - brightest.margin(alpha / brightest.mean.size) - offset_high_dn - ROUNDING_DN
    bound = gain_low * np.maximum(low, 0.0)
    return np.where(np.isfinite(offset_high_dn), bound, 0.0)
