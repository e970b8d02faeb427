"""A lower bound on the read noise of every pixel, simultaneous over the pixels (what privacy may count).

The pooled read noise (:mod:`.photon_transfer`) is a mean over pixels: its interval's lower end is not a
bound on any one pixel's. Per pixel ``p``, the temporal dark variance at the two shortest exposures
``t1 < t2`` of the quietest temperature is ``v_p(t) = (sigma_p^2 + D_p t) / g^2 + 1/12`` (EMVA 1288 eq. (9):
read noise, dark shot noise, rounding), so its zero-exposure intercept removes the dark shot noise:

    I_p >= v1_low - t1 max(v2_high - v1_low, 0) / (t2 - t1),   sigma_p >= g_low sqrt(max(I_p - 1/12, 0))

with ``v1_low``, ``v2_high`` one-sided chi-square bounds (``frames - 1`` degrees of freedom) at level
``alpha / (4 P)`` each (Bonferroni over the two series and the ``P`` pixels) and ``g_low`` the gain
interval's lower end. A pixel whose dark mean at ``t2`` may be clipped is not measured: its bound is 0.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from .frames import SeriesStats


def pixel_read_noise_lower(
    darks: list[SeriesStats], gain_low: float, alpha: float, ceiling_dn: float = np.inf
) -> np.ndarray:
    """Per-pixel lower bounds (e-), simultaneous at ``1 - alpha`` over the pixels (module docstring);
    ``darks``: dark series of one temperature at two exposures at least."""
    quiet = sorted(darks, key=lambda s: s.exposure_us)
    first, second = quiet[0], next(s for s in quiet if s.exposure_us > quiet[0].exposure_us)
    level = alpha / (4 * first.mean.size)
    v1_low = first.var * (first.frames - 1) / stats.chi2.ppf(1 - level, first.frames - 1)
    v2_high = second.var * (second.frames - 1) / stats.chi2.ppf(level, second.frames - 1)
    t1, t2 = first.exposure_us, second.exposure_us
    intercept = v1_low - t1 * np.maximum(v2_high - v1_low, 0.0) / (t2 - t1)
    bound = gain_low * np.sqrt(np.maximum(intercept - 1 / 12, 0.0))
    return np.where(second.mean < ceiling_dn, bound, 0.0)


def floor_over_pixels(bound: float | np.ndarray, used: np.ndarray | None = None) -> float:
    """The smallest of per-pixel lower bounds over the pixels ``used`` (a boolean mask or indices; None:
    all), or a scalar bound already taken over them: what a privacy law over those pixels may count."""
    values = np.atleast_1d(np.asarray(bound, dtype=np.float64))
    if used is not None and values.size > 1:
        values = values[used]
    if values.size == 0:
        raise ValueError("no pixels used: a lower bound over no pixels is undefined")
    return float(values.min())
