"""Pixel-bootstrap statistics the calibration's estimators share: the interval level and method, the
percentile interval of bootstrap draws, and pixel means under each draw (:mod:`.photon_transfer`'s
docstring says how the pixels are resampled)."""

from __future__ import annotations

import numpy as np

from .schema import Estimate

LEVEL = 0.95
BOOTSTRAP = "pixel bootstrap, percentile"


def percentile_estimate(value: float, draws: np.ndarray, alpha: float, unit: str, method: str = BOOTSTRAP) -> Estimate:
    """Point ``value`` and the percentile interval of ``draws`` (widened to contain ``value``)."""
    low, high = np.quantile(draws, [alpha / 2, 1 - alpha / 2])
    return Estimate(
        value=float(value),
        lower=float(min(low, value)),
        upper=float(max(high, value)),
        level=1 - alpha,
        method=method,
        unit=unit,
    )


def boot_mean(array: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Pixel means of ``array`` (pixels,) under each bootstrap draw of ``index`` (B, pixels)."""
    return array[index].mean(axis=1)
