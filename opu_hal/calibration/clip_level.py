"""The clip level of a photon-transfer sweep (:mod:`.photon_transfer`'s docstring): the ADC range
``(max_dn - b) g`` when at least :data:`ADC_CLIPPED_FRACTION` of the pixels, or :data:`ADC_TOP_READS`
of the reads, sit at the ADC top at the brightest level; else the full well ``(m_plateau - b) g``
when the last levels are a plateau; else a refusal."""

from __future__ import annotations

import math

import numpy as np

from ..contract.errors import CalibrationError
from .bootstrap import BOOTSTRAP, boot_mean, percentile_estimate
from .frames import Acquisition, on_plateau
from .schema import Estimate

ADC_CLIPPED_FRACTION = 0.5  # pixels at the ADC top, at the brightest level, that make it ADC-limited
ADC_TOP_READS = 0.25  # or reads at the top: a full well (equal in e- for every pixel) below it lets none through


def clip_level(
    acq: Acquisition,
    plateau: float,
    dark_dn: float,
    black: float,
    black_draws: np.ndarray,
    k: float,
    k_draws: np.ndarray,
    index: np.ndarray,
    alpha: float,
) -> tuple[Estimate, str]:
    """The clip level in electrons and what sets it ("adc" or "full_well"), checked on the sweep's
    own last levels (module docstring); refuses a sweep that ends neither clipped nor on a plateau."""
    last = acq.ptc[-1]
    max_dn = acq.max_dn
    at_top = float((last.mean >= max_dn - 0.5).mean()) if max_dn is not None else 0.0
    reads = last.reads_at_top / (last.frames * last.mean.size) if last.reads_at_top is not None else 0.0
    if at_top >= ADC_CLIPPED_FRACTION or reads >= ADC_TOP_READS:
        if max_dn is None:
            raise CalibrationError(
                "the sweep's last level reads at the ADC top, but its acquisition declares no "
                "max_dn (the camera's top DN) to place the clip level at"
            )
        draws = (max_dn - black_draws) / k_draws
        return percentile_estimate(
            (max_dn - black) / k, draws, alpha, "e-", "ADC top (max_dn - black) g; " + BOOTSTRAP
        ), "adc"
    means = [float(s.mean.mean()) for s in acq.ptc[-3:]]
    signal = means[-1] - dark_dn
    grown = max(means[-1] - means[0], 0.0) / max(signal, 1e-12) if len(means) == 3 else math.inf
    if not on_plateau(acq.ptc, dark_dn):
        raise CalibrationError(
            f"photon transfer: the sweep's brightest levels are not a plateau (the mean grew {grown:.3%} over "
            f"the last two levels, {at_top:.0%} of pixels at the ADC top {acq.max_dn} DN): the clip level is "
            "not identified; extend the sweep past saturation"
        )
    draws = (boot_mean(last.mean, index) - black_draws) / k_draws
    return percentile_estimate((plateau - black) / k, draws, alpha, "e-"), "full_well"
