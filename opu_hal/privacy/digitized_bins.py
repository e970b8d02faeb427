"""Digitized speckle counts: one kept pixel per value, the kept pixels' means in bins, the maximum charged.

**The release.** Value ``i`` of a draw reads ONE kept pixel ``p(i)`` (cyclically over the ``K`` kept pixels);
its counts ``C_1``, ``C_2`` each sum ``reads`` digitized reads of that pixel in ``reads`` distinct frames
(``2 reads`` frames per pass over the kept pixels, ``2 reads ceil(n / K)`` per draw of ``n`` values).
Reads of one pixel in distinct frames are i.i.d. (eq. 1 of :mod:`.digitized` at the pixel's mean
``lambda_p``, with the camera's read noise, gain, black level and full well), so ``K_i = C_1 - C_2``
has exactly the flat-beam law (eq. 3) of the camera at ``lambda_p``: no unity gain is assumed. Values
read in other frames (or other pixels) are independent of ``K_i``.

**Why the maximum over bins is sound.** The per-coordinate bound (:mod:`.pmf_rdp`, (6)) is
``D_alpha(M(x') || M(x)) = sum_j D_alpha(coordinate j) <= sum_j delta_j^2 kappa_alpha(p_j)`` (coordinates
independent: their roundings and their noise values; ``kappa_alpha(p)`` bounds, for ONE law ``p``,
``D_alpha / delta^2`` over every shift ``|delta| <= c``). Nothing in (6) needs the coordinates to share a
law: with ``p_j`` the law of coordinate ``j``'s pixel, ``sum_j delta_j^2 kappa_alpha(p_j) <= c^2 max_j
kappa_alpha(p_j)``, at every order separately. Each kept pixel's mean lies in its bounds ``[L_p, U_p]``
(the anchor map, simultaneous over pixels), hence in its bin's box ``[min L, max U]`` x the read-noise
interval x the gain, black level and full well intervals; so ``max_j kappa_alpha(p_j) <= max over bins of
the box's kappa_alpha``, which is the pointwise maximum over the bins' per-order curves
(:func:`.digitized_events.box_coefficients` takes it over the union of the bins' grid cameras). The
coupling (5) is per value too: value ``j``'s noise is coupled with its own accounted law ``p_bar_j`` at
cost ``tau_j <= max tau``, so ``dimension max tau`` is charged as for one law. The assignment ``p(i)`` is
fixed before the data is seen.

**What remains a numerical check.** Within a bin's box the curve is evaluated on the grid of
:func:`.digitized_box.box_cameras` (3 points per axis of the mean and the read noise, both ends of the
rest): as for the flat beam, a law whose divergence peaked strictly between grid points would be missed.
Narrower bins (``ratio`` closer to 1) tighten that check at the cost of more box evaluations.
"""

from __future__ import annotations

from dataclasses import replace

from .digitized import CameraRead
from .digitized_box import BOX_POINTS, box_cameras
from .events import PrivacyParameterError


def binned_cameras(
    low: CameraRead,
    bins: tuple[tuple[float, float], ...],
    read_noise_e_high: float,
    points: int = BOX_POINTS,
    **highs: float | None,
) -> tuple[CameraRead, ...]:
    """The union (first occurrence kept, in order) of :func:`.digitized_box.box_cameras` over the mean
    ``bins``, each from ``low`` with its mean interval; ``highs`` close the gain, black level and full well."""
    if not bins:
        raise PrivacyParameterError("binned cameras need at least one mean bin (low, high)")
    cameras: dict[CameraRead, None] = {}
    for mean_low, mean_high in bins:
        box = box_cameras(replace(low, mean_e=float(mean_low)), float(mean_high), read_noise_e_high, points, **highs)
        cameras.update(dict.fromkeys(box))
    return tuple(cameras)
