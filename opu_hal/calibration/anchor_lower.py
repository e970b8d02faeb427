"""The anchor map's lower bounds without the normal approximation: Bernstein's inequality on Poisson
electrons plus Gaussian read noise (:mod:`.anchor_map`), the accounted side's counterpart of
:mod:`.anchor_upper`.

A read before rounding is ``Y = o + (E + N) / g`` in DN (``E ~ Poisson(lambda)`` electrons, dark signal
included; ``N`` Gaussian read noise of variance ``sigma^2`` e^2; offset ``o``; gain ``g``). Poisson's upper
tail is sub-gamma: ``log E e^{s(E - lambda)} = lambda sum_{k>=2} s^k / k! <= lambda s^2 / (2 (1 - s / 3))``
(``k! >= 2 * 3^{k-2}``), so ``Y`` is sub-gamma with variance ``v = (lambda + sigma^2) / g^2`` and scale
``c = 1 / (3 g)``, and the mean ``m_Y`` of ``F`` independent reads obeys (Boucheron, Lugosi and Massart,
*Concentration Inequalities*, 2013, section 2.4)

    P(m_Y >= mu_Y + z sqrt(v) + c L / F) <= q,    L = ln(1 / q),    z = sqrt(2 L / F).

The ADC rounds: ``m_Y >= m - 1/2`` for the rounded reads' mean ``m``. With ``u = mu_Y - O_lo`` (``O_lo`` a
lower bound on the offset, ``g_lo`` on the gain, ``s^2`` an upper bound on the read noise's variance in
DN^2), ``v <= u / g_lo + s^2`` and ``c <= 1 / (3 g_lo)``, so outside the event of probability ``q``

    D = m - 1/2 - O_lo - L / (3 g_lo F) <= u + z sqrt(u / g_lo + s^2).

The right side grows with ``u``, so ``u >= D - z r`` with ``r = (sqrt(z^2 + 4 g_lo (g_lo s^2 + D)) - z) /
(2 g_lo)`` its root in ``r = sqrt(u / g_lo + s^2)`` (``u >= 0`` where ``D <= z s``), and ``lambda = g (mu_Y - o)
>= g_lo (u + O_lo - O_hi)``. It holds for every frame count. Student's ``t``, used before, errs on the safe
side on these reads but is not proven (``python -m scripts.analysis.t_bound_skew``).
"""

from __future__ import annotations

import math

import numpy as np


def bernstein_floor_dn(
    mean_dn: np.ndarray,
    frames: int,
    level: float,
    offset_dn: tuple[float | np.ndarray, float | np.ndarray],
    gain_low: float,
    read_var_dn2: float | np.ndarray,
) -> np.ndarray:
    """The lower bound on ``mu_Y - O_hi`` (DN) of the module docstring at ``level`` per pixel, never below 0;
    0 where the offset is unknown (``offset_dn = (O_lo, O_hi)`` with ``-inf`` or ``+inf``)."""
    if not (0 < level < 1 and frames >= 1 and gain_low > 0):
        raise ValueError(f"need 0 < level < 1, frames >= 1 and gain_low > 0, got {level}, {frames}, {gain_low}")
    low, high = (np.asarray(o, dtype=np.float64) for o in offset_dn)
    log_q = math.log(1 / level)
    z = math.sqrt(2 * log_q / frames)
    known = np.isfinite(low) & np.isfinite(high)
    with np.errstate(invalid="ignore"):
        head = np.asarray(mean_dn, dtype=np.float64) - 0.5 - np.where(known, low, 0.0) - log_q / (3 * gain_low * frames)
        total = np.maximum(gain_low * read_var_dn2 + head, 0.0)
        r = (np.sqrt(z * z + 4 * gain_low * total) - z) / (2 * gain_low)
        floor = head - z * r + np.where(known, low - high, 0.0)
    return np.where(known, np.maximum(floor, 0.0), 0.0)
