"""Photon-transfer estimation (Janesick, *Photon Transfer*, 2007; EMVA 1288 release 4.0, sec. 6-8).

Per pixel ``p`` and series ``s``: ``m_sp`` the mean and ``v_sp`` the temporal variance (DN, DN^2).
With ``K`` the system gain in DN/e- (``g = 1 / K`` e-/DN), EMVA 1288 eq. (8)-(9):

    v - v_dark = K (m - m_dark)          photon transfer: the slope is K (shot noise is Poisson)
    v_dark = K^2 (sigma_r^2 + D) + 1/12  read noise, dark shot noise and ADC rounding (Sheppard)
    m_dark(t) = b + K D_R t              dark signal grows linearly with exposure t; b: black level

The slope is fitted through the origin on the levels below 70 % of saturation (EMVA's fit range),
saturation being the level of largest variance (:func:`.emva.saturation_index`). Saturation is
reported both ways: EMVA's saturation point (``eta mu_p.sat``, :mod:`.emva`) and the clip level,
which the estimator checks itself: when at least :data:`.clip_level.ADC_CLIPPED_FRACTION` of the pixels sit
at the ADC top at the brightest level, or :data:`.clip_level.ADC_TOP_READS` of its reads (an EMVA 1288 sweep
ends where the mean reaches the top: about half the reads are clipped there), the clip level is
the ADC range ``(max_dn - b) g``;
otherwise the last two levels must be a plateau (mean grown by less than
:func:`~.frames.on_plateau`) and it is ``(m_plateau - b) g``, the full well; otherwise the
estimator refuses (a sweep that stops short of saturation does not identify it). Quantum efficiency ``eta = g (m - m_dark) / photons`` needs a known illumination: the
simulated device knows its anchor power; a camera alone does not (then it is left out).

Intervals (level 95 %, two-sided): the pixel bootstrap (pixels resampled with replacement, the
same draw for every series, so correlations between series are kept; percentile intervals) for
every fitted quantity; read noise combines a chi-square interval of the pooled dark variance with
the bootstrap interval of the gain (Bonferroni, each at 97.5 %). Worst-pixel lower bounds (what a
per-coordinate privacy bound may use) are per-pixel one-sided normal bounds, Bonferroni over
pixels, times the lower gain bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from ..contract.errors import CalibrationError
from .bootstrap import BOOTSTRAP, LEVEL, boot_mean, percentile_estimate
from .clip_level import clip_level
from .dark_lines import dark_ceiling_dn, dark_line, hot_pixel_mask
from .emva import defect_pixels, linearity, saturation_index, uniformity, zero_exposure_read_noise
from .frames import Acquisition
from .pixel_read_noise import pixel_read_noise_lower
from .schema import DefectPixels, Estimate, Linearity, PhotonTransferPoint, Uniformity

FIT_FRACTION = 0.7  # EMVA 1288: photon-transfer fit on 0-70 % of saturation


@dataclass
class PhotonTransfer:
    """Estimates, and the bootstrap replicates later fits reuse."""

    gain: Estimate
    gain_draws: np.ndarray
    read_noise: Estimate
    black: Estimate
    saturation: Estimate
    saturation_limited_by: str
    quantum_efficiency: Estimate | None
    fit_levels: int
    hot_pixels: np.ndarray  # bool mask (pixels,)
    index: np.ndarray  # (B, pixels) bootstrap draws
    alpha: float
    dark_noise_dn: float = 0.0  # temporal dark noise of the quietest series, DN
    saturation_point: Estimate | None = None  # EMVA 1288: at the largest variance
    linearity: Linearity | None = None
    uniformity: Uniformity | None = None
    defects: DefectPixels | None = None
    levels: int = 0
    curve: list[PhotonTransferPoint] = field(default_factory=list)
    read_noise_min_pixel_lower: float | None = None  # e-, simultaneous over pixels (:mod:`.pixel_read_noise`)
    read_noise_pixel_lower: np.ndarray | None = None  # e-, each pixel's (its minimum is the one above)


def _read_noise(
    acq: Acquisition, index: np.ndarray, ceiling: float, hot: np.ndarray, k: float, k_draws: np.ndarray, alpha: float
) -> tuple[Estimate, float]:
    """Read noise (e-) from the quietest dark series (coldest, shortest), hot pixels left out, and
    that series' pooled variance (DN^2): chi-square on the variance x pixel bootstrap of the gain,
    Bonferroni; Sheppard's 1/12 DN^2; EMVA's zero-exposure estimate when every level has a dark."""
    quiet = min(acq.dark, key=lambda s: (s.temperature_c, s.exposure_us))
    same_t = [s for s in acq.dark if s.temperature_c == quiet.temperature_c]
    b_quiet, _, _, _ = dark_line(same_t, index, ceiling)
    good = ~hot
    var_dn = float(quiet.var[good].mean())
    df = int(good.sum()) * (quiet.frames - 1)
    var_low = var_dn * df / stats.chi2.ppf(1 - alpha / 4, df)
    var_high = var_dn * df / stats.chi2.ppf(alpha / 4, df)
    g_low, g_high = np.quantile(1 / k_draws, [alpha / 4, 1 - alpha / 4])
    dark_dn = max(float(quiet.mean[good].mean()) - b_quiet, 0.0)

    def read_noise(g: float, variance: float) -> float:
        return math.sqrt(max(g * g * (variance - 1 / 12) - dark_dn * g, 0.0))

    undersampled = var_dn < 0.25 + 1 / 12  # dark noise below half a DN: Sheppard's correction fails
    if acq.ptc_darks is not None:  # a dark per level: EMVA's zero-exposure read noise
        read = zero_exposure_read_noise(same_t, ~hot, 1 / k, 1 / k_draws, index, alpha)
    else:
        read = Estimate(
            value=read_noise(1 / k, var_dn),
            lower=0.0 if undersampled else read_noise(g_low, var_low),
            upper=max(read_noise(g_high, var_high), math.sqrt(max(var_high, 0.0)) * g_high if undersampled else 0.0),
            level=1 - alpha,
            unit="e-",
            method="chi-square (pooled dark variance) x pixel bootstrap (gain), Bonferroni; Sheppard 1/12 DN^2",
        )
    return read, var_dn


def estimate(acq: Acquisition, *, alpha: float = 1 - LEVEL, bootstrap: int = 400, seed: int = 0) -> PhotonTransfer:
    """Gain, read noise, black level, saturation and quantum efficiency from ``acq``."""
    pixels = acq.pixels
    index = np.random.default_rng(seed).integers(0, pixels, size=(bootstrap, pixels))
    darks = acq.level_darks()
    x = np.array([(s.mean - d.mean).mean() for s, d in zip(acq.ptc, darks)])
    y = np.array([(s.var - d.var).mean() for s, d in zip(acq.ptc, darks)])
    saturated_at = saturation_index(y)
    fit = np.flatnonzero((x > 0) & (x <= FIT_FRACTION * x[saturated_at]) & (np.arange(len(x)) < saturated_at))
    if fit.size < 3:
        raise CalibrationError(
            f"photon transfer: only {fit.size} illumination level(s) below 70 % of saturation; "
            "need 3 (lower the starting anchor power or the exposure)"
        )
    x_draws = np.stack([boot_mean(acq.ptc[i].mean - darks[i].mean, index) for i in fit], axis=-1)
    y_draws = np.stack([boot_mean(acq.ptc[i].var - darks[i].var, index) for i in fit], axis=-1)
    k = float(x[fit] @ y[fit] / (x[fit] @ x[fit]))
    k_draws = (x_draws * y_draws).sum(-1) / (x_draws**2).sum(-1)
    if not k > 0:
        raise CalibrationError(f"photon transfer: the variance does not grow with the signal (slope {k:g})")
    gain = percentile_estimate(1 / k, 1 / k_draws, alpha, "e-/DN")

    plateau = float(acq.ptc[-1].mean.mean())
    ceiling = dark_ceiling_dn(acq)
    at_reference = [s for s in acq.dark if s.temperature_c == acq.reference_temperature_c]
    hot = hot_pixel_mask(acq.dark, ceiling)
    black_value, _, black_draws, _ = dark_line(at_reference, index, ceiling)
    black = percentile_estimate(black_value, black_draws, alpha, "DN")

    read, var_dn = _read_noise(acq, index, ceiling, hot, k, k_draws, alpha)
    coldest = min(s.temperature_c for s in acq.dark)
    pixel_floor = pixel_read_noise_lower(
        [s for s in acq.dark if s.temperature_c == coldest], float(np.quantile(1 / k_draws, alpha / 2)), alpha, ceiling
    )

    saturation, limited = clip_level(
        acq, plateau, float(darks[-1].mean.mean()), black_value, black_draws, k, k_draws, index, alpha
    )

    qe, point = _efficiency_and_saturation_point(acq, x, x_draws, fit, saturated_at, k, k_draws, index, alpha)
    all_photons = np.array([s.photons_per_pixel or 0.0 for s in acq.ptc])
    known = bool(all_photons.all())
    lin = linearity(
        x,
        all_photons if known else np.array([s.anchor_power_uw or 0.0 for s in acq.ptc]),
        saturated_at,
        "photons" if known else "power",
    )
    half = int(np.argmin(np.abs(x[: saturated_at + 1] - 0.5 * x[saturated_at])))
    uniform, highpass = uniformity(
        acq.ptc[half], darks[half], 1 / k, 1 / k_draws, index, alpha, x[half] / x[saturated_at]
    )
    return PhotonTransfer(
        gain=gain,
        gain_draws=1 / k_draws,
        read_noise=read,
        black=black,
        saturation=saturation,
        saturation_limited_by=limited,
        quantum_efficiency=qe,
        fit_levels=int(fit.size),
        hot_pixels=hot,
        index=index,
        alpha=alpha,
        dark_noise_dn=math.sqrt(var_dn),
        saturation_point=point,
        linearity=lin,
        uniformity=uniform,
        defects=defect_pixels(hot, highpass),
        levels=len(acq.ptc),
        curve=sweep_points(acq, x, fit),
        read_noise_min_pixel_lower=float(pixel_floor.min()),
        read_noise_pixel_lower=pixel_floor,
    )


def _efficiency_and_saturation_point(
    acq: Acquisition,
    x: np.ndarray,
    x_draws: np.ndarray,
    fit: np.ndarray,
    saturated_at: int,
    k: float,
    k_draws: np.ndarray,
    index: np.ndarray,
    alpha: float,
) -> tuple[Estimate | None, Estimate]:
    """Quantum efficiency ``eta = g (m - m_dark) / photons`` over the fitted levels (None without a
    known illumination at each) and EMVA 1288's saturation point at the largest variance: ``eta mu_p.sat``
    when ``eta`` is known, else ``mu_y.sat / K``. ``x``: dark-subtracted level means (DN)."""
    darks = acq.level_darks()
    qe = None
    photons = np.array([acq.ptc[i].photons_per_pixel or 0.0 for i in fit])
    if all(acq.ptc[i].photons_per_pixel for i in fit):
        qe_value = float((x[fit] / k) @ photons / (photons @ photons))
        qe_draws = ((x_draws / k_draws[:, None]) @ photons) / (photons @ photons)
        qe = percentile_estimate(qe_value, qe_draws, alpha, "e-/photon")
    all_photons = np.array([s.photons_per_pixel or 0.0 for s in acq.ptc])
    if qe is not None:
        point = percentile_estimate(
            qe.value * all_photons[saturated_at],
            qe_draws * all_photons[saturated_at],
            alpha,
            "e-",
            "EMVA 1288 eta mu_p.sat at the largest variance; " + BOOTSTRAP,
        )
    else:
        point = percentile_estimate(
            x[saturated_at] / k,
            boot_mean(acq.ptc[saturated_at].mean - darks[saturated_at].mean, index) / k_draws,
            alpha,
            "e-",
            "EMVA 1288 mu_y.sat / K at the largest variance; " + BOOTSTRAP,
        )
    return qe, point


def sweep_points(acq: Acquisition, signal_dn: np.ndarray, fit: np.ndarray) -> list[PhotonTransferPoint]:
    """The sweep's levels as the calibration file keeps them (pixel means; what the figure draws)."""
    used = set(fit.tolist())
    return [
        PhotonTransferPoint(
            exposure_us=s.exposure_us,
            anchor_power_uw=s.anchor_power_uw,
            signal_dn=float(signal_dn[i]),
            variance_dn2=float(s.var.mean()),
            dark_variance_dn2=float(d.var.mean()),
            in_fit=i in used,
        )
        for i, (s, d) in enumerate(zip(acq.ptc, acq.level_darks()))
    ]


def worst_pixel_upper(signal_dn: np.ndarray, var_dn: np.ndarray, frames: int, gain_high: float, alpha: float) -> float:
    """Upper bound (e-) of the largest per-pixel mean, simultaneous over pixels (Bonferroni)."""
    z = stats.norm.ppf(1 - alpha / signal_dn.size)
    return max(float(np.max(signal_dn + z * np.sqrt(var_dn / frames))) * gain_high, 0.0)


def worst_pixel_lower(signal_dn: np.ndarray, var_dn: np.ndarray, frames: int, gain_low: float, alpha: float) -> float:
    """Lower bound (e-) of the smallest per-pixel mean, simultaneous over pixels (Bonferroni)."""
    z = stats.norm.ppf(1 - alpha / signal_dn.size)
    return max(float(np.min(signal_dn - z * np.sqrt(var_dn / frames))) * gain_low, 0.0)
