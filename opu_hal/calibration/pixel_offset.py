"""Each pixel's own dark offset (DSNU's offset part, EMVA 1288 section 8), bounded from recorded dark frames
at the operating point, simultaneous over the pixels: what replaces the pooled black level when a pixel's
anchor read in DN is turned into electrons (:mod:`.recorded_anchor_map`).

Pixel ``j``'s dark mean at exposure ``t`` is ``mu_j(t) = o_j + D_j t / g`` (EMVA 1288 eq. (9): offset plus
dark signal, ``D_j >= 0``). An anchor read's mean is ``o_j + lambda_j / g`` with ``lambda_j`` its mean
electrons, dark signal included, so bounds on ``lambda_j`` need an upper and a lower bound on ``o_j``:

    o_j <= mu_j(t_op) <= m_j(t_op) + t s_j / sqrt(F) = O_hi_j
    o_j  = mu_j(t1) - t1 (mu_j(t2) - mu_j(t1)) / (t2 - t1)
        >= L_j(t1) - t1 max(U_j(t2) - L_j(t1), 0) / (t2 - t1) = O_lo_j

with ``t_op`` the operating exposure, ``t1 < t2`` the two shortest dark exposures at the operating
temperature, ``L`` and ``U`` one-sided Student bounds ``m -+ t s / sqrt(F)`` (``F - 1`` degrees of
freedom; the reads' mean taken as normal, the sample variance at least 1/12 DN^2, the rounding's). Each of the three one-sided bounds is at ``alpha / (3 P)``
over the ``P`` pixels: by the union bound ``O_lo_j <= o_j <= O_hi_j`` holds at every pixel at once with
probability at least ``1 - alpha``. A pixel read at 0 or at the ADC top in any of these dark frames (its
mean biased by clipping) gets ``(-inf, +inf)``: it is never kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ..contract.errors import CalibrationError

QUANTIZATION_VAR_DN2 = 1 / 12  # EMVA 1288's variance of the ADC's rounding: the floor of a sample variance


@dataclass(frozen=True)
class FrameMoments:
    """Per-pixel mean, sample variance (``ddof = 1``) and clipping (a read at 0 or ``max_dn``) of ``frames``."""

    mean: np.ndarray
    var: np.ndarray
    frames: int
    clipped: np.ndarray

    def margin(self, level: float) -> np.ndarray:
        """One-sided Student margin ``t_{F-1}(level) s / sqrt(F)`` of each pixel's mean, with ``s^2`` at least
        :data:`QUANTIZATION_VAR_DN2` (few frames of a quiet pixel may all read one DN: ``s = 0``, no margin)."""
        t = float(stats.t.isf(level, self.frames - 1))
        return np.asarray(t * np.sqrt(np.maximum(self.var, QUANTIZATION_VAR_DN2) / self.frames))


def frame_moments(frames_dn: Iterable[np.ndarray], max_dn: float, what: str) -> FrameMoments:
    """The moments of ``frames_dn`` (``(P,)`` each, in DN), streamed; ``what`` names them in a refusal."""
    frames = iter(frames_dn)
    first = next(frames, None)
    if first is None:
        raise CalibrationError(f"{what}: need at least 2 frames, got 0")
    total = np.array(first, dtype=np.float64)
    squares, clipped, count = total * total, (total >= max_dn) | (total <= 0), 1
    for frame in frames:
        frame = np.asarray(frame, dtype=np.float64)
        total += frame
        squares += frame * frame
        clipped |= (frame >= max_dn) | (frame <= 0)
        count += 1
    if count < 2:
        raise CalibrationError(f"{what}: need at least 2 frames, got {count}")
    mean = total / count
    var = np.maximum(squares / count - mean * mean, 0.0) * count / (count - 1)
    return FrameMoments(mean, var, count, clipped)


def offset_bounds(
    at_operating: FrameMoments,
    first: tuple[float, FrameMoments],
    second: tuple[float, FrameMoments],
    alpha: float,
) -> tuple[np.ndarray, np.ndarray]:
    """``(O_lo, O_hi)`` in DN per pixel (module docstring) from the dark series at the operating exposure and
    at the two shortest exposures ``first = (t1, moments)``, ``second = (t2, moments)``, ``t1 < t2``."""
    (t1, one), (t2, two) = first, second
    if not 0 <= t1 < t2:
        raise ValueError(f"dark exposures must satisfy 0 <= t1 < t2, got {t1:g} and {t2:g}")
    level = alpha / (3 * at_operating.mean.size)
    high = at_operating.mean + at_operating.margin(level)
    low1, high2 = one.mean - one.margin(level), two.mean + two.margin(level)
    low = low1 - t1 * np.maximum(high2 - low1, 0.0) / (t2 - t1)
    clipped = at_operating.clipped | one.clipped | two.clipped
    return np.where(clipped, -np.inf, low), np.where(clipped, np.inf, high)
