"""Dark current against temperature: a local law whose intervals carry the model's mismatch.

The Konnik-Welsh law ``D_R(T) = 2.55e15 P_A D_FM T^1.5 exp(-E_g(T) / (2 k T))``
(:func:`opu_hal.camera.physics.dark_current_rate`) fixes the activation at half the Varshni band
gap; real sensors differ (diffusion ~E_g, depletion ~E_g/2, traps in between). Rather than fit
one shape and quote its pixel-bootstrap spread (which missed the truth whenever the shape was
wrong: the interval ignored the model), the rates are fitted with the smallest model that holds
both the Konnik-Welsh law and any fixed-activation Arrhenius law to far below the measurement
noise over a calibrated range of ~100 K: a quadratic in ``x = 1 / (k T)``,

    ln(D_R / T^1.5) = a - b x - c x^2      (weighted least squares, weights 1 / bootstrap variance)

from which, at a reference temperature, the local activation energy ``E_a = b + 2 c x``, the
doubling temperature ``ln 2 / (1.5 / T + E_a / (k T^2))`` and the figure of merit (the fitted
rate at 300 K over the Konnik-Welsh shape at 300 K: ``D_FM`` is by definition the dark current
density at 300 K). With 3 temperatures the quadratic is exactly determined; with 2 the fit is
linear (``c = 0``) and the file says model mismatch is not covered. Intervals: percentiles of the
pixel-bootstrap draws of the rates (gain included) refitted, widened by a lack-of-fit check: when
the weighted residual chi-square exceeds its 99 % quantile, the interval is scaled by
``sqrt(chi2 / dof)`` and the law is flagged (the law does not fit the data).

Rates are pixel means over the *typical* pixels: hot pixels (dark_lines.hot_pixel_mask) are
left out at every temperature, so a hot pixel that clips at long exposures cannot bias the law
(issue 36: the 85 C rate was 13.6 % low); their count is reported.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from ..camera.physics import BOLTZMANN_EV_PER_K, FOM_REFERENCE_K, KELVIN_OFFSET, dark_current_rate
from .bootstrap import percentile_estimate
from .schema import Estimate, TemperatureLaw

METHOD = "quadratic ln(D/T^1.5) in 1/kT, pixel bootstrap of the rates, percentile (widened on lack of fit; union with the straight line's)"
LACK_OF_FIT_QUANTILE = 0.99
MAX_CENSORED = 0.001  # fraction of typical pixels clipped at every dark exposure that drops a temperature


def law_shape(temperatures_c: np.ndarray, pixel_area_cm2: float) -> np.ndarray:
    """Konnik-Welsh rate per unit figure of merit, e-/s per nA/cm^2."""
    return np.array([dark_current_rate(float(t), pixel_area_cm2, 1.0) for t in temperatures_c])


def doubling_temperature_k(activation_ev: np.ndarray | float, celsius: float) -> np.ndarray | float:
    """Temperature step that doubles ``C T^1.5 exp(-E_a / kT)`` at ``celsius`` (local ``E_a``)."""
    t = celsius + KELVIN_OFFSET
    return math.log(2) / (1.5 / t + np.asarray(activation_ev) / (BOLTZMANN_EV_PER_K * t * t))


def _fit(x: np.ndarray, logs: np.ndarray, weights: np.ndarray, degree: int) -> np.ndarray:
    """Weighted polynomial coefficients (..., degree + 1) of ``logs`` (..., n) in ``x`` (n,), low order first."""
    design = np.stack([x**p for p in range(degree + 1)], axis=-1) * np.sqrt(weights)[:, None]
    solve = np.linalg.pinv(design)  # (degree + 1, n)
    return (logs * np.sqrt(weights)) @ solve.T


def _usable(
    temperatures_c: np.ndarray, rates: np.ndarray, rate_draws: np.ndarray, alpha: float, censored: np.ndarray | None
) -> tuple[np.ndarray, list[str]]:
    """Temperatures whose rate is resolved above 0 and not censored, and the censored ones left out."""
    low = np.quantile(rate_draws, alpha / 2, axis=0)
    usable = (low > 0) & (rates > 0)
    dropped: list[str] = []
    if censored is not None:
        dropped = [f"{t:g} C ({c:.1%})" for t, c, u in zip(temperatures_c, censored, usable) if u and c > MAX_CENSORED]
        usable &= censored <= MAX_CENSORED
    return usable, dropped


def _shape_only_law(
    temperatures_c: np.ndarray,
    rates: np.ndarray,
    rate_draws: np.ndarray,
    usable: np.ndarray,
    pixel_area_cm2: float,
    alpha: float,
    reference_c: float,
) -> TemperatureLaw:
    """No slope: the Konnik-Welsh shape, one parameter, through the origin."""
    shape = law_shape(temperatures_c, pixel_area_cm2)
    weights = 1 / np.maximum(rate_draws.std(axis=0), 1e-12 * max(float(np.abs(rates).max()), 1e-30)) ** 2
    fom = float((weights * rates * shape).sum() / (weights * shape * shape).sum())
    fom_draws = (rate_draws * weights * shape).sum(-1) / (weights * shape * shape).sum()
    return TemperatureLaw(
        dark_fom_na_per_cm2=percentile_estimate(fom, fom_draws, alpha, "nA/cm^2", "Konnik-Welsh shape; " + METHOD),
        pixel_area_cm2=pixel_area_cm2,
        doubling_reference_c=reference_c,
        notes=[
            f"{int(usable.sum())} temperature(s) with a dark rate resolved above 0: the Konnik-Welsh shape "
            "is assumed (its activation energy is not checked; model mismatch is not in the interval)"
        ],
    )


def _lack_of_fit(
    xc: np.ndarray, logs: np.ndarray, weights: np.ndarray, coef: np.ndarray, degree: int, notes: list[str]
) -> float:
    """The factor that widens the intervals (``sqrt(chi2 / dof)`` when the weighted residual
    chi-square exceeds its :data:`LACK_OF_FIT_QUANTILE`, else 1); appends what was checked to ``notes``."""
    dof = len(xc) - degree - 1
    if dof > 0:
        residual = logs - np.stack([xc**p for p in range(degree + 1)], -1) @ coef
        chi2 = float((weights * residual**2).sum())
        if chi2 > stats.chi2.ppf(LACK_OF_FIT_QUANTILE, dof):
            notes.append(
                f"lack of fit: weighted chi-square {chi2:.3g} on {dof} dof is above its "
                f"{LACK_OF_FIT_QUANTILE:.0%} quantile; intervals widened x{math.sqrt(chi2 / dof):.3g}: "
                "the law does not fit"
            )
            return math.sqrt(chi2 / dof)
    elif degree == 1:
        notes.append("two usable temperatures: linear in 1/kT, model mismatch is not in the intervals")
    else:
        notes.append("three usable temperatures: the quadratic is exactly determined, no lack-of-fit check")
    return 1.0


def _at(celsius: float, c: np.ndarray, x0: float, degree: int) -> tuple[np.ndarray, np.ndarray]:
    """(ln(D/T^1.5), local activation energy) at ``celsius`` from coefficients ``c`` centred at ``x0``."""
    xr = 1 / (BOLTZMANN_EV_PER_K * (celsius + KELVIN_OFFSET)) - x0
    value = np.asarray(sum(c[..., p] * xr**p for p in range(degree + 1)))
    slope = np.asarray(sum(p * c[..., p] * xr ** (p - 1) for p in range(1, degree + 1)))
    return value, -slope


def _widened(
    value: float, draws: np.ndarray, unit: str, alpha: float, inflate: float, of_line: np.ndarray | None = None
) -> Estimate:
    """Percentile interval of ``draws`` widened by ``inflate``; with ``of_line``, its union with the
    straight line's interval (neither shape is privileged by a fit that cannot tell them apart)."""
    draws = value + inflate * (draws - value)
    estimate = percentile_estimate(value, draws, alpha, unit, METHOD)
    if of_line is None:
        return estimate
    low, high = np.quantile(of_line, [alpha / 2, 1 - alpha / 2])
    return estimate.model_copy(
        update={"lower": float(min(estimate.lower, low)), "upper": float(max(estimate.upper, high))}
    )


def _fom_and_activation(
    c: np.ndarray, x0: float, degree: int, shape_300: float, reference_c: float
) -> tuple[np.ndarray, np.ndarray]:
    """Figure of merit (the law's rate at 300 K over the Konnik-Welsh shape there) and the local
    activation energy at ``reference_c``, from coefficients ``c``."""
    fom = np.exp(_at(FOM_REFERENCE_K - KELVIN_OFFSET, c, x0, degree)[0]) * FOM_REFERENCE_K**1.5 / shape_300
    return fom, _at(reference_c, c, x0, degree)[1]


def fit_temperature_law(
    temperatures_c: np.ndarray,
    rates: np.ndarray,
    rate_draws: np.ndarray,
    pixel_area_cm2: float,
    alpha: float,
    reference_c: float = 25.0,
    censored: np.ndarray | None = None,
) -> TemperatureLaw | None:
    """Fit the local law to rates (e-/s, ``(n_T,)``) and their bootstrap draws ``(B, n_T)``;
    ``censored``: per temperature, the fraction of typical pixels with fewer than two dark exposures
    below the clip ceiling (no line: their rate is not measured, the mean is biased): over :data:`MAX_CENSORED`, the
    temperature is left out of the law, and the file says so."""
    temperatures_c = np.asarray(temperatures_c, dtype=float)
    usable, dropped = _usable(temperatures_c, rates, rate_draws, alpha, censored)
    if usable.sum() < 2:
        return _shape_only_law(temperatures_c, rates, rate_draws, usable, pixel_area_cm2, alpha, reference_c)
    t_k = temperatures_c[usable] + KELVIN_OFFSET
    x = 1 / (BOLTZMANN_EV_PER_K * t_k)
    x0 = x.mean()
    logs = np.log(rates[usable] / t_k**1.5)
    log_draws = np.log(np.maximum(rate_draws[:, usable], 1e-300) / t_k**1.5)
    weights = 1 / np.maximum(log_draws.std(axis=0), 1e-9) ** 2
    degree = 2 if usable.sum() >= 3 else 1
    coef = _fit(x - x0, logs, weights, degree)
    coef_draws = _fit(x - x0, log_draws, weights, degree)
    notes = (
        [f"left out of the law, typical pixels with fewer than two unclipped dark exposures: {', '.join(dropped)}"]
        if dropped
        else []
    )
    inflate = _lack_of_fit(x - x0, logs, weights, coef, degree, notes)
    shape_300 = law_shape(np.array([FOM_REFERENCE_K - KELVIN_OFFSET]), pixel_area_cm2)[0]
    fom, ea = (float(v) for v in _fom_and_activation(coef, x0, degree, shape_300, reference_c))
    fom_draws, ea_draws = _fom_and_activation(coef_draws, x0, degree, shape_300, reference_c)
    line: dict[str, np.ndarray] = {}
    if degree == 2:  # model choice in the interval: the straight line's draws join the quadratic's
        line_draws = _fit(x - x0, log_draws, weights, 1)
        padded = np.concatenate([line_draws, np.zeros((line_draws.shape[0], 1))], axis=-1)
        line["fom"], line["ea"] = _fom_and_activation(padded, x0, degree, shape_300, reference_c)
        line["td"] = np.asarray(doubling_temperature_k(line["ea"], reference_c))
    return TemperatureLaw(
        dark_fom_na_per_cm2=_widened(fom, fom_draws, "nA/cm^2", alpha, inflate, line.get("fom")),
        pixel_area_cm2=pixel_area_cm2,
        doubling_reference_c=reference_c,
        activation_energy_ev=_widened(ea, ea_draws, "eV", alpha, inflate, line.get("ea")),
        doubling_temperature_k=_widened(
            float(doubling_temperature_k(ea, reference_c)),
            np.asarray(doubling_temperature_k(ea_draws, reference_c)),
            "K",
            alpha,
            inflate,
            line.get("td"),
        ),
        coefficients=[float(c) for c in coef],
        x_center_per_ev=float(x0),
        notes=notes,
    )


def law_rate(law: TemperatureLaw, temperature_c: float) -> float:
    """The fitted law's dark rate [e-/s/pixel] at ``temperature_c`` (point estimate)."""
    if law.coefficients is None:
        return law.dark_fom_na_per_cm2.value * float(law_shape(np.array([temperature_c]), law.pixel_area_cm2)[0])
    t = temperature_c + KELVIN_OFFSET
    xr = 1 / (BOLTZMANN_EV_PER_K * t) - law.x_center_per_ev
    return float(t**1.5 * math.exp(sum(c * xr**p for p, c in enumerate(law.coefficients))))
