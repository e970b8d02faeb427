"""Dark current against temperature: the Konnik-Welsh law and a free Arrhenius fit.

Konnik and Welsh 2014 (after Janesick): ``D_R(T) = 2.55e15 P_A D_FM T^1.5 exp(-E_g(T) / (2 k T))``
with a fixed activation (half the Varshni band gap): one parameter, the figure of merit ``D_FM``,
fitted by weighted least squares through the origin on the measured rates. The free fit
``D_R = C T^1.5 exp(-E_a / (k T))`` (log-linear least squares) checks the activation energy and
gives the doubling temperature ``ln 2 / (1.5 / T + E_a / (k T^2))`` at a reference temperature.
Intervals: percentiles of the same pixel-bootstrap draws as the rates (so the gain's uncertainty is in).
Temperatures whose rate interval reaches 0 are left out of the free fit (log of a non-positive rate).
"""

from __future__ import annotations

import math

import numpy as np

from ..camera.physics import BOLTZMANN_EV_PER_K, KELVIN_OFFSET, dark_current_rate
from .photon_transfer import percentile_estimate
from .schema import TemperatureLaw

METHOD = "pixel bootstrap of the rates, percentile"


def law_shape(temperatures_c: np.ndarray, pixel_area_cm2: float) -> np.ndarray:
    """Konnik-Welsh rate per unit figure of merit, e-/s per nA/cm^2."""
    return np.array([dark_current_rate(float(t), pixel_area_cm2, 1.0) for t in temperatures_c])


def doubling_temperature_k(activation_ev: np.ndarray | float, celsius: float) -> np.ndarray | float:
    """Temperature step that doubles ``C T^1.5 exp(-E_a / kT)`` at ``celsius``."""
    t = celsius + KELVIN_OFFSET
    return math.log(2) / (1.5 / t + np.asarray(activation_ev) / (BOLTZMANN_EV_PER_K * t * t))


def fit_temperature_law(
    temperatures_c: np.ndarray, rates: np.ndarray, rate_draws: np.ndarray, pixel_area_cm2: float,
    alpha: float, reference_c: float = 25.0,
) -> TemperatureLaw | None:
    """Fit both laws to rates (e-/s, ``(n_T,)``) and their bootstrap draws ``(B, n_T)``."""
    if len(temperatures_c) < 1:
        return None
    shape = law_shape(temperatures_c, pixel_area_cm2)
    spread = rate_draws.std(axis=0)
    weights = 1 / np.maximum(spread, 1e-12 * max(float(np.abs(rates).max()), 1e-30)) ** 2
    fom = float((weights * rates * shape).sum() / (weights * shape * shape).sum())
    fom_draws = (rate_draws * weights * shape).sum(-1) / (weights * shape * shape).sum()
    law = {"dark_fom_na_per_cm2": percentile_estimate(fom, fom_draws, alpha, "nA/cm^2", METHOD),
           "pixel_area_cm2": pixel_area_cm2, "doubling_reference_c": reference_c}
    low = np.quantile(rate_draws, alpha / 2, axis=0)
    usable = low > 0
    if usable.sum() >= 2:
        t_k = temperatures_c[usable] + KELVIN_OFFSET
        x = -1 / (BOLTZMANN_EV_PER_K * t_k)
        xc = x - x.mean()

        def activation(r: np.ndarray) -> np.ndarray:
            logs = np.log(np.maximum(r, 1e-300) / t_k**1.5)
            return (logs - logs.mean(axis=-1, keepdims=True)) @ xc / (xc @ xc)

        ea = float(activation(rates[usable]))
        ea_draws = activation(rate_draws[:, usable])
        law["activation_energy_ev"] = percentile_estimate(ea, ea_draws, alpha, "eV", METHOD)
        td_draws = doubling_temperature_k(ea_draws, reference_c)
        law["doubling_temperature_k"] = percentile_estimate(
            float(doubling_temperature_k(ea, reference_c)), td_draws, alpha, "K", METHOD)
    return TemperatureLaw(**law)
