"""The EMVA 1288 (Release 4.0) quantities beyond photon transfer: saturation point, linearity,
spatial nonuniformity (PRNU, DSNU) and defect pixels, from the per-pixel series statistics.

- **Saturation point** (sec. 6.5): the illumination level of largest temporal variance; the saturation capacity is ``eta mu_p.sat`` (``mu_y.sat / K`` without a
  known illumination). The clip level (full well or ADC top) is reported beside it.
- **Linearity** (sec. 6.7): the dark-subtracted mean ``y`` against the illumination ``x`` (photons,
  or the source power), a linear fit with offset weighted by ``1 / y`` over 5-95 % of ``y`` at the
  saturation point; the error is the relative deviation ``100 (y - fit) / fit`` (min, max).
- **Nonuniformity** (sec. 8.2): spatial variances of the per-pixel means with the temporal part
  removed, ``s^2 = var_pixels(mean) - mean(var) / L``; ``PRNU = sqrt(s^2_50 - s^2_dark) /
  (mu_50 - mu_dark)`` at the level nearest 50 % of saturation, ``DSNU = s_dark / K``. The flat field
  is the anchor beam; a high-pass PRNU divides each pixel's response by the mean response of its
  neighbours (a window of :data:`SMOOTH_WINDOW` pixels, itself left out), removing a smooth
  illumination profile, as EMVA 4.0 does with its box filter.
- **Defect pixels** (sec. 8.3): counts beyond :data:`DEFECT_MADS` robust standard deviations.
- **Zero-exposure read noise** (sec. 6.4, with a dark series per exposure): the pooled dark
  variance is a line in the exposure, ``sigma^2_y.dark(t) = K^2 (sigma_d0^2 + mu_I t) + 1/12``;
  its intercept gives ``sigma_d = sqrt(sigma^2_y.dark(0) - 1/12) / K``, dark shot noise removed by
  the extrapolation rather than subtracted.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from ..contract.errors import CalibrationError
from .frames import SeriesStats
from .schema import DefectPixels, Estimate, Linearity, Uniformity

SMOOTH_WINDOW = 31
DEFECT_MADS = 6.0
LINEARITY_RANGE = (0.05, 0.95)
BOOT = "pixel bootstrap, percentile"


def saturation_index(variance: np.ndarray) -> int:
    """Index of the saturation point: the level of largest temporal variance. (The reference code
    ``emva1288`` walks back from the brightest level and stops at the first local maximum, which
    on a noisy full-well plateau stops on the plateau; the global maximum is the standard's text.)"""
    return int(np.argmax(variance))


def linearity(signal_dn: np.ndarray, illumination: np.ndarray, saturated_at: int, against: str) -> Linearity:
    """EMVA 1288 linearity error over 5-95 % of the signal at the saturation point."""
    top = signal_dn[saturated_at]
    use = np.flatnonzero(
        (signal_dn >= LINEARITY_RANGE[0] * top)
        & (signal_dn <= LINEARITY_RANGE[1] * top)
        & (np.arange(signal_dn.size) <= saturated_at)
    )
    x, y = illumination[use], signal_dn[use]
    slope, offset = np.polynomial.polynomial.polyfit(x, y, 1, w=1 / y)[::-1]
    fit = slope * x + offset
    deviation = 100 * (y - fit) / fit
    return Linearity(
        error_min_pct=float(deviation.min()),
        error_max_pct=float(deviation.max()),
        levels=int(use.size),
        against=against,
    )


def _spatial_variance(mean: np.ndarray, var: np.ndarray, frames: int, index: np.ndarray | None = None):
    """Spatial variance of per-pixel means, temporal part removed; under ``index`` draws if given."""
    if index is None:
        return float(mean.var() - var.mean() / frames)
    m = mean[index]
    return m.var(axis=1) - var[index].mean(axis=1) / frames


def _neighbour_mean(values: np.ndarray, window: int = SMOOTH_WINDOW) -> np.ndarray:
    """Mean of each pixel's ``window`` neighbours along the read order, the pixel itself left out."""
    kernel = np.ones(window)
    sums = np.convolve(values, kernel, mode="same") - values
    counts = np.convolve(np.ones_like(values), kernel, mode="same") - 1
    return sums / np.maximum(counts, 1)


def _estimate(value: float, draws: np.ndarray, alpha: float, unit: str) -> Estimate:
    low, high = np.quantile(draws, [alpha / 2, 1 - alpha / 2])
    return Estimate(
        value=value,
        lower=float(min(low, value)),
        upper=float(max(high, value)),
        level=1 - alpha,
        method=BOOT,
        unit=unit,
    )


def uniformity(
    bright: SeriesStats,
    dark: SeriesStats,
    gain_e_per_dn: float,
    gain_draws: np.ndarray,
    index: np.ndarray,
    alpha: float,
    level_fraction: float,
) -> tuple[Uniformity, np.ndarray]:
    """PRNU, high-pass PRNU, DSNU and the largest pixel response bound; and each pixel's high-pass
    response (for the defect counts)."""
    frames = bright.frames
    signal = bright.mean - dark.mean
    mu = float(signal.mean())
    s2_bright = _spatial_variance(bright.mean, bright.var, frames)
    s2_dark = _spatial_variance(dark.mean, dark.var, dark.frames)
    prnu = 100 * np.sqrt(max(s2_bright - s2_dark, 0.0)) / mu
    b_draws = _spatial_variance(bright.mean, bright.var, frames, index)
    d_draws = _spatial_variance(dark.mean, dark.var, dark.frames, index)
    mu_draws = signal[index].mean(axis=1)
    prnu_draws = 100 * np.sqrt(np.maximum(b_draws - d_draws, 0.0)) / mu_draws
    dsnu = float(np.sqrt(max(s2_dark, 0.0)) * gain_e_per_dn)
    dsnu_draws = np.sqrt(np.maximum(d_draws, 0.0)) * gain_draws

    temporal = (bright.var + dark.var) / frames  # variance of each pixel's dark-subtracted mean
    response = signal / mu
    smooth = _neighbour_mean(response)
    highpass = response / smooth
    hp_noise = temporal / (mu * smooth) ** 2
    hp_var = float(highpass.var() - hp_noise.mean())
    hp_draws = highpass[index].var(axis=1) - hp_noise[index].mean(axis=1)
    prnu_hp = 100 * np.sqrt(max(hp_var, 0.0))
    # brightest pixel over its smooth illumination: per-pixel one-sided bounds (Bonferroni over
    # pixels), times the relative uncertainty of the neighbours' mean it is divided by
    z = stats.norm.ppf(1 - alpha / (2 * signal.size))
    local = 1 + z * np.sqrt(max(hp_var, 0.0) / (SMOOTH_WINDOW - 1))
    response_max = float(np.max(highpass + z * np.sqrt(hp_noise))) * local
    return Uniformity(
        prnu_pct=_estimate(float(prnu), prnu_draws, alpha, "%"),
        prnu_highpass_pct=_estimate(prnu_hp, 100 * np.sqrt(np.maximum(hp_draws, 0.0)), alpha, "%"),
        dsnu_e=_estimate(dsnu, dsnu_draws, alpha, "e-"),
        response_max_upper=response_max,
        level_fraction=float(level_fraction),
    ), highpass


def robust_outliers(values: np.ndarray, mads: float = DEFECT_MADS) -> tuple[int, int]:
    """(below, above): values beyond ``mads`` robust standard deviations (1.4826 MAD) of the median."""
    finite = values[np.isfinite(values)]
    median = np.median(finite)
    spread = max(1.4826 * np.median(np.abs(finite - median)), 1e-12)
    return int((finite < median - mads * spread).sum()), int((finite > median + mads * spread).sum())


def defect_pixels(hot: np.ndarray, highpass: np.ndarray) -> DefectPixels:
    dim, bright = robust_outliers(highpass)
    return DefectPixels(hot=int(hot.sum()), dim=dim, bright=bright, threshold_mads=DEFECT_MADS)


def zero_exposure_read_noise(
    darks: list[SeriesStats],
    good: np.ndarray,
    gain_e_per_dn: float,
    gain_draws: np.ndarray,
    index: np.ndarray,
    alpha: float,
) -> Estimate:
    """EMVA 1288 temporal dark noise ``sigma_d`` (e-) at zero exposure from ``darks`` (one
    temperature, several exposures), the ``good`` pixels' pooled variance fitted against the
    exposure (module docstring); the pixel bootstrap draws the intercept and the gain together."""
    exposures = np.array([s.exposure_us for s in darks])
    if np.unique(exposures).size < 2:
        raise CalibrationError(
            f"zero-exposure read noise needs dark series at two exposures at least, got {np.unique(exposures).tolist()} us"
        )
    pooled = np.array([s.var[good].mean() for s in darks])
    weight = good[index]
    draws = np.stack([(s.var[index] * weight).sum(1) / np.maximum(weight.sum(1), 1) for s in darks], axis=-1)
    xc = exposures - exposures.mean()

    def intercept(v: np.ndarray) -> np.ndarray:
        slope = (v - v.mean(axis=-1, keepdims=True)) @ xc / (xc @ xc)
        return v.mean(axis=-1) - slope * exposures.mean()

    value = gain_e_per_dn * np.sqrt(max(float(intercept(pooled)) - 1 / 12, 0.0))
    value_draws = gain_draws * np.sqrt(np.maximum(intercept(draws) - 1 / 12, 0.0))
    low, high = np.quantile(value_draws, [alpha / 2, 1 - alpha / 2])
    return Estimate(
        value=float(value),
        lower=float(min(low, value)),
        upper=float(max(high, value)),
        level=1 - alpha,
        method="zero-exposure intercept of the pooled dark variance (EMVA 1288); "
        + BOOT
        + " with the gain; Sheppard 1/12 DN^2",
        unit="e-",
    )
