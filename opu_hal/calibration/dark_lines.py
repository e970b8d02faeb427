"""Dark frames: per-pixel black level and dark slope against exposure, hot pixels, and the DN
above which a dark read may be clipped (EMVA 1288 eq. (9): ``m_dark(t) = b + K D_R t``)."""

from __future__ import annotations

import numpy as np

from .frames import Acquisition, SeriesStats

HOT_PIXEL_MADS = 10.0


def pixel_lines(
    darks: list[SeriesStats], ceiling_dn: float = np.inf, black_dn: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Per-pixel black level (DN) and dark slope (DN/us) at one temperature (NaN: unusable pixel).

    Each pixel gets its own least-squares line over the exposures where its mean stays below
    ``ceiling_dn`` (a hot pixel saturating at long exposures keeps its short ones); a pixel with
    one usable exposure takes the median black level of the pixels with two (``black_dn``, the
    reference black level, when none has two: a hot sensor clipping at long exposures); one with
    none is left out.
    """
    x = np.array([s.exposure_us for s in darks])[:, None]
    y = np.stack([s.mean for s in darks])  # (exposures, pixels)
    use = y < ceiling_dn
    n = use.sum(0)
    w = use.astype(float)
    xm = (w * x).sum(0) / np.maximum(n, 1)
    ym = (w * y).sum(0) / np.maximum(n, 1)
    sxx = (w * (x - xm) ** 2).sum(0)
    full = (n >= 2) & (sxx > 0)
    slope = np.where(full, (w * (x - xm) * (y - ym)).sum(0) / np.where(full, sxx, 1.0), 0.0)
    intercept = ym - slope * xm
    common = (
        float(np.median(intercept[full]))
        if full.any()
        else float(black_dn)
        if black_dn is not None
        else float(np.median(y[0]))
    )
    single = n == 1
    slope = np.where(single, (ym - common) / xm.clip(min=1e-12), slope)
    intercept = np.where(single, common, intercept)
    keep = n >= 1
    return np.where(keep, intercept, np.nan), np.where(keep, slope, np.nan)


def usable_exposures(darks: list[SeriesStats], ceiling_dn: float = np.inf) -> np.ndarray:
    """Per pixel, how many of ``darks``' exposures stay below ``ceiling_dn`` (what its line is fitted on)."""
    return (np.stack([s.mean for s in darks]) < ceiling_dn).sum(0)


def dark_line(darks: list[SeriesStats], index: np.ndarray, ceiling_dn: float = np.inf, black_dn: float | None = None):
    """Black level (DN) and dark slope (DN/us), pixel means, and their bootstrap draws."""
    intercept, slope = pixel_lines(darks, ceiling_dn, black_dn)
    b_draws = np.nanmean(intercept[index], axis=1)
    s_draws = np.nanmean(slope[index], axis=1)
    return float(np.nanmean(intercept)), float(np.nanmean(slope)), b_draws, s_draws


def _robust_limit(slope: np.ndarray) -> float:
    """``median + HOT_PIXEL_MADS`` robust sds (1.4826 MAD) of the finite ``slope`` values."""
    finite = slope[np.isfinite(slope)]
    median = np.median(finite)
    return float(median + HOT_PIXEL_MADS * max(1.4826 * np.median(np.abs(finite - median)), 1e-12))


def hot_threshold_dn_per_us(darks: list[SeriesStats], ceiling_dn: float) -> float:
    """The dark slope (DN/us) above which a pixel is hot at the temperature of ``darks`` (NaN: fewer
    than two pixels measured there)."""
    _, slope = pixel_lines(darks, ceiling_dn)
    return _robust_limit(slope) if np.isfinite(slope).sum() >= 2 else float("nan")


def hot_pixel_mask(darks: list[SeriesStats], ceiling_dn: float) -> np.ndarray:
    """Pixels whose dark slope lies ``HOT_PIXEL_MADS`` robust sds above the median slope at any
    temperature where the slope is measured (a pixel whose every dark read clips at the hottest
    temperature is judged at the colder ones, so a bright but typical pixel is not called hot); a
    pixel measured at no temperature is hot."""
    hot = np.zeros(darks[0].mean.size, dtype=bool)
    measured = np.zeros_like(hot)
    for celsius in sorted({s.temperature_c for s in darks}):
        _, slope = pixel_lines([s for s in darks if s.temperature_c == celsius], ceiling_dn)
        finite = np.isfinite(slope)
        if finite.sum() < 2:
            continue
        hot |= finite & (slope > _robust_limit(slope))
        measured |= finite
    return hot | ~measured


def dark_ceiling_dn(acq: Acquisition) -> float:
    """DN above which a dark read may be clipped: half-way from the black level to saturation."""
    black = float(np.median(min(acq.dark, key=lambda s: s.exposure_us).mean))
    return black + 0.5 * (float(acq.ptc[-1].mean.mean()) - black)
