"""Calibrate every pixel the privacy path reads: a per-pixel map of lower confidence bounds on the
speckle anchor's read (:class:`~opu_hal.contract.anchor_map.AnchorBoundMap`), from frames alone.

From ``F`` anchor frames in DN at the run's operating point, pixel ``j``'s mean ``m_j`` gives, with the
photon-transfer calibration's black level ``[B_lo, B_hi]`` and gain ``[g_lo, g_hi]`` (its intervals, never a
profile's figures),

    b_j = g_lo d_j,     u_j = g_hi w_j,

with ``d_j`` the Bernstein bound of :mod:`.anchor_lower` at ``alpha / (2 P)`` over the ``P`` pixels of the
sensor and ``w_j`` the Chernoff bound of :mod:`.anchor_upper` at ``alpha / (4 P)``, both on Poisson electrons
plus Gaussian read noise, the rounding included. Both use one upper bound on the read noise's variance, at
``alpha / (4 P)`` (from the calibration's pooled read noise, the simulator's cameras sharing one; from each
pixel's dark frames for a recorded map). By the union bound (Bonferroni), ``b_j <= lambda_j <= u_j`` holds at
every pixel simultaneously with probability at least ``1 - alpha`` (less the black-level, gain and pooled
read-noise intervals' own error rates, stated by the calibration). A recorded map
(:mod:`.recorded_anchor_map`) takes each pixel's own offset interval in place of ``[B_lo, B_hi]``. A
pixel that clipped in any frame gets a lower bound of 0 and an infinite upper bound (never kept). The map is
written next to the calibration file (``<calibration>.anchor-map.npz``) with the operating point it holds at.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..contract.anchor_map import AnchorBoundMap
from ..contract.errors import CalibrationError
from .anchor_lower import bernstein_floor_dn
from .anchor_upper import chernoff_rise_dn, pooled_read_variance_dn2
from .pixel_offset import frame_moments
from .schema import Calibration

DEFAULT_ANCHOR_FRAMES = 64
DEFAULT_ALPHA = 0.01
OPTIONAL_ARRAYS = (
    "read_noise_lower_e",
    "offset_low_dn",
    "offset_high_dn",
    "full_well_lower_e",
)  # maps written before them lack them


def anchor_map_path(calibration_path: str | Path) -> Path:
    """Where the anchor map of the calibration at ``calibration_path`` lives."""
    path = Path(calibration_path)
    return path.with_name(path.stem + ".anchor-map.npz")


def bounds_from_frames(
    frames_dn,
    max_dn: float,
    black_dn: tuple[float, float] | tuple[np.ndarray, np.ndarray],
    gain: tuple[float, float],
    alpha: float,
    source: str,
    *,
    read_var_dn2: float | np.ndarray,
    **extra: np.ndarray,
) -> AnchorBoundMap:
    """The map from an iterable of frames ``(P,)`` in DN (module docstring). ``black_dn``: one interval for
    every pixel, or each pixel's own offset interval (arrays, :mod:`.pixel_offset`; ``-inf`` / ``+inf`` for
    an unknown offset: never kept); ``read_var_dn2``: an upper bound on the read noise's variance in DN^2
    (one for every pixel, or each pixel's, at :func:`upper_level`); ``extra``: the map's per-pixel arrays
    measured elsewhere."""
    moments = frame_moments(frames_dn, max_dn, "anchor map")
    mean, count = moments.mean, moments.frames
    black_lo, black_hi = (np.broadcast_to(np.asarray(b, dtype=np.float64), mean.shape) for b in black_dn)
    floor = bernstein_floor_dn(mean, count, alpha / (2 * mean.size), (black_lo, black_hi), gain[0], read_var_dn2)
    lower = np.where(moments.clipped, 0.0, gain[0] * floor)
    rise = chernoff_rise_dn(mean, count, upper_level(alpha, mean.size), black_lo, gain[0], read_var_dn2)
    upper = np.where(moments.clipped, np.inf, gain[1] * rise)
    with np.errstate(invalid="ignore"):  # an unknown offset (-inf, +inf) has no midpoint: its estimate is 0
        black = 0.5 * (black_lo + black_hi)
        estimate = np.where(np.isfinite(black), (mean - black) * 0.5 * (gain[0] + gain[1]), 0.0)
    return AnchorBoundMap(lower, upper, estimate, confidence=1 - alpha, frames=count, source=source, **extra)


def upper_level(alpha: float, pixels: int) -> float:
    """The level of each of the upper side's two events per pixel: the Chernoff tail and the read-noise bound."""
    return alpha / (4 * pixels)


def measure_anchor_map(
    device, calibration: Calibration, frames: int = DEFAULT_ANCHOR_FRAMES, alpha: float = DEFAULT_ALPHA
) -> AnchorBoundMap:
    """Read ``frames`` speckle-anchor frames of the whole sensor from ``device`` and bound every pixel."""
    if not (isinstance(frames, int) and frames >= 2):
        raise CalibrationError(f"anchor map: frames must be an integer >= 2, got {frames!r}")
    black, gain = calibration.black_level_dn, calibration.gain_e_per_dn
    source = (
        f"calibration anchor map ({frames} frames, per-pixel lower bounds simultaneous over every pixel at "
        f"{1 - alpha:.0%}, Bonferroni; black level and gain at their {gain.level:.0%} intervals; upper bounds by "
        "Chernoff, the read noise at its pooled interval's upper end)"
    )
    return bounds_from_frames(
        device.anchor_frames(frames),
        device.sensor.max_dn,
        (black.lower, black.upper),
        (gain.lower, gain.upper),
        alpha,
        source,
        read_var_dn2=pooled_read_variance_dn2(calibration.read_noise_e.upper, gain.lower),
    )


def save_anchor_map(bounds: AnchorBoundMap, path: Path, temperature_c: float, exposure_us: float) -> Path:
    """Write ``bounds`` and the operating point it holds at (npz, float64), with the per-pixel read-noise and
    offset bounds where the map has them (:data:`OPTIONAL_ARRAYS`: a map without them stays readable)."""
    with open(path, "wb") as handle:
        np.savez(
            handle,
            lower_e=bounds.lower_e,
            upper_e=bounds.upper_e,
            estimate_e=bounds.estimate_e,
            meta=np.array([bounds.confidence, bounds.frames, temperature_c, exposure_us]),
            source=np.array(bounds.source),
            **{key: getattr(bounds, key) for key in OPTIONAL_ARRAYS if getattr(bounds, key) is not None},
        )
    return path


def anchor_map_point(path: Path) -> tuple[float, float]:
    """The temperature (C) and exposure (us) the map at ``path`` was measured at."""
    try:
        with np.load(path) as data:
            return float(data["meta"][2]), float(data["meta"][3])
    except (OSError, KeyError, ValueError, IndexError) as exc:
        raise CalibrationError(f"{path}: not an anchor map ({exc}); re-run `opu-hal calibrate`") from None


def load_anchor_map(path: Path, temperature_c: float, exposure_us: float) -> AnchorBoundMap:
    """The map at ``path``, refused unless measured at ``temperature_c`` and ``exposure_us`` (a cooler
    sensor or a shorter exposure gives less dark signal and light than was measured)."""
    try:
        with np.load(path) as data:
            confidence, frames, celsius, exposure = (float(v) for v in data["meta"])
            bounds = AnchorBoundMap(
                data["lower_e"],
                data["upper_e"],
                data["estimate_e"],
                confidence,
                int(frames),
                f"{data['source']} {path}",
                **{key: data[key] for key in OPTIONAL_ARRAYS if key in data.files},  # absent from older maps
            )
    except (OSError, KeyError, ValueError) as exc:
        raise CalibrationError(f"{path}: not an anchor map ({exc}); re-run `opu-hal calibrate`") from None
    if celsius != temperature_c or exposure != exposure_us:
        raise CalibrationError(
            f"{path}: the anchor map was measured at {celsius:g} C, {exposure:g} us, not at {temperature_c:g} C, "
            f"{exposure_us:g} us; calibrate at the run's operating point"
        )
    return bounds


def calibrate_anchor_map(
    device, calibration: Calibration, out: Path, frames: int = DEFAULT_ANCHOR_FRAMES
) -> str | None:
    """For a device with a speckle privacy anchor: measure, write next to ``out`` and describe the map."""
    if getattr(device.profile, "privacy_anchor", None) != "speckle" or not hasattr(device, "anchor_frames"):
        return None
    operating = getattr(device.profile, "temperature_c", None)  # the map holds at the run's operating point,
    if operating is not None:  # not where the sweep left the sensor
        device.set_options(temperature_c=float(operating))
    bounds = measure_anchor_map(device, calibration, frames)
    path = save_anchor_map(bounds, anchor_map_path(out), device.temperature_c, device.profile.exposure_us)
    positive = int(np.count_nonzero(bounds.lower_e > 0))
    return (
        f"anchor map: {bounds.pixels} pixels x {frames} frames of the speckle anchor, {positive} with a positive "
        f"lower bound (median {float(np.median(bounds.lower_e)):.4g} e-), simultaneous at {bounds.confidence:.0%}; "
        f"wrote {path}"
    )
