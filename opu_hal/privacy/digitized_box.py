"""The worst end of a calibrated camera: a CHECK over the box of calibrated intervals, not a proof.

A calibration gives intervals, not values: one read's photo-electron mean ``lambda_e`` in
``[lambda_lo, lambda_hi]`` and the read noise ``sigma_r`` in ``[sigma_lo, sigma_hi]``. For Skellam
noise the lower ends are the worst (more Poisson mean is post-processing of less). The digitized law
(:mod:`.digitized`, eq. 2) has no such order: a larger mean moves mass toward the clip atom at the
ADC top and changes where the rounding bins fall, and a larger read noise smooths the rounding but
also widens the tails into the clip atoms, so neither the Renyi curve (:mod:`.pmf_rdp`, (6)) nor the
coupling cost ``tau`` ((4)) is provably monotone in either.

What is done instead (:func:`box_cameras`): the accounted curve at every order is the MAXIMUM of
the curves of the cameras on a ``points x points`` grid over the box, its four corners included
(``points >= 2``; default :data:`BOX_POINTS`), and ``tau`` the maximum of theirs. Between grid
points the curve is not evaluated: a law whose divergence peaked strictly between them would be
missed. This is a numerical check of the worst end, stated as such in every record that uses it
(:class:`.digitized_events.DigitizedNoiseEvent` ``mean_e_high`` / ``read_noise_e_high``); a degenerate
box (the profile's declared camera) is the single exact camera.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .digitized import CameraRead
from .events import PrivacyParameterError

BOX_POINTS = 3  # per axis: corners, edge midpoints and the centre


def box_cameras(
    low: CameraRead, mean_e_high: float, read_noise_e_high: float, points: int = BOX_POINTS
) -> tuple[CameraRead, ...]:
    """The cameras of the grid over ``[low.mean_e, mean_e_high] x [low.read_noise_e, read_noise_e_high]``
    (corners included; a zero-width side collapses to its one value)."""
    if not (isinstance(points, int) and 2 <= points <= 9):
        raise PrivacyParameterError(f"box points per axis must be an integer in [2, 9], got {points!r}")
    if not (mean_e_high >= low.mean_e and read_noise_e_high >= low.read_noise_e):
        raise PrivacyParameterError(
            f"the box's high ends ({mean_e_high}, {read_noise_e_high}) must not be below its low ends "
            f"({low.mean_e}, {low.read_noise_e})"
        )
    means = np.unique(np.linspace(low.mean_e, mean_e_high, points))
    noises = np.unique(np.linspace(low.read_noise_e, read_noise_e_high, points))
    return tuple(replace(low, mean_e=float(m), read_noise_e=float(r)) for m in means for r in noises)
