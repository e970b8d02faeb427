"""The worst end of a calibrated camera: a CHECK over the box of calibrated intervals, not a proof.

A calibration gives intervals, not values: one read's photo-electron mean ``lambda_e`` in
``[lambda_lo, lambda_hi]`` and the read noise ``sigma_r`` in ``[sigma_lo, sigma_hi]``. For Skellam
noise the lower ends are the worst (more Poisson mean is post-processing of less). The digitized law
(:mod:`.digitized`, eq. 2) has no such order: a larger mean moves mass toward the clip atom at the
ADC top and changes where the rounding bins fall, and a larger read noise smooths the rounding but
also widens the tails into the clip atoms, so neither the Renyi curve (:mod:`.pmf_rdp`, (6)) nor the
coupling cost ``tau`` ((4)) is provably monotone in either.

The gain, black level and full well are calibrated too (a calibration gives their intervals, and
nothing privacy-relevant comes from a profile's physics keys when one is given): a larger gain puts
fewer DN of noise per electron (a hidden 8-bit camera at 7 e-/DN: epsilon 5.73 and 6.15 at the gain
interval's ends where the profile's gain gave 5.98), the black level's fraction moves the bins.

What is done instead (:func:`box_cameras`): the accounted curve at every order is the MAXIMUM of
the curves of the cameras on a grid over the box: ``points x points`` over the mean and the read noise
(``points >= 2``; default :data:`BOX_POINTS`), times both ends of the gain, black level and full
well, every corner included; and ``tau`` the maximum of theirs. Between grid
points the curve is not evaluated: a law whose divergence peaked strictly between them would be
missed. This is a numerical check of the worst end, stated as such in every record that uses it
(:class:`.digitized_events.DigitizedNoiseEvent` ``mean_e_high`` / ``read_noise_e_high``); a degenerate
box (the profile's declared camera) is the single exact camera.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np

from .digitized import _POISSON_SIGMAS, CameraRead
from .events import PrivacyParameterError

BOX_POINTS = 3  # per axis of the mean and the read noise: corners, edge midpoints and the centre
CORNER_AXES = ("gain_e_per_dn", "black_level_dn", "full_well_e")  # taken at both ends only


def box_cameras(
    low: CameraRead,
    mean_e_high: float,
    read_noise_e_high: float,
    points: int = BOX_POINTS,
    *,
    gain_e_per_dn_high: float | None = None,
    black_level_dn_high: float | None = None,
    full_well_e_high: float | None = None,
) -> tuple[CameraRead, ...]:
    """The cameras of the grid over the box from ``low`` to the high ends: ``points`` per axis for the
    read's mean and the read noise, the two ends for the gain, the black level and the full well (every
    corner included; a zero-width side collapses to its one value). The full well collapses to its low end
    where every camera's evaluated electron range lies below it (:func:`_full_well_matters`): the
    computed law is then the same at every full well of the interval."""
    if not (isinstance(points, int) and 2 <= points <= 9):
        raise PrivacyParameterError(f"box points per axis must be an integer in [2, 9], got {points!r}")
    high = {
        "mean_e": mean_e_high,
        "read_noise_e": read_noise_e_high,
        "gain_e_per_dn": low.gain_e_per_dn if gain_e_per_dn_high is None else gain_e_per_dn_high,
        "black_level_dn": low.black_level_dn if black_level_dn_high is None else black_level_dn_high,
        "full_well_e": low.full_well_e if full_well_e_high is None else full_well_e_high,
    }
    below = [name for name, value in high.items() if not value >= getattr(low, name)]
    if below:
        raise PrivacyParameterError(
            f"the box's high ends must not be below its low ends: {', '.join(f'{n} {high[n]} < {getattr(low, n)}' for n in below)}"
        )
    axes = {name: np.unique(np.linspace(getattr(low, name), high[name], points)) for name in ("mean_e", "read_noise_e")}
    for name in CORNER_AXES:
        axes[name] = np.unique([getattr(low, name), high[name]])
    if not _full_well_matters(high["mean_e"], low.full_well_e):
        axes["full_well_e"] = axes["full_well_e"][:1]
    grid = itertools.product(*(axes[name] for name in ("mean_e", "read_noise_e", *CORNER_AXES)))
    return tuple(
        replace(
            low,
            mean_e=float(m),
            read_noise_e=float(r),
            gain_e_per_dn=float(g),
            black_level_dn=float(b),
            full_well_e=float(w),
        )
        for m, r, g, b, w in grid
    )


def _full_well_matters(mean_e_high: float, full_well_low: float) -> bool:
    """Whether a full well at or above ``full_well_low`` can change the computed law of a read of mean up to
    ``mean_e_high``: :func:`.digitized.read_log_pmf` evaluates electron counts up to ``ceil(mean + 45 sqrt(mean)
    + 800)`` and clips them at the full well only when its floor lies within that range (2 e- of margin)."""
    return full_well_low <= mean_e_high + _POISSON_SIGMAS * math.sqrt(mean_e_high) + 802
