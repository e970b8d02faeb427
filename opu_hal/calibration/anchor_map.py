"""Calibrate every pixel the privacy path reads: a per-pixel map of lower confidence bounds on the
speckle anchor's read (:class:`~opu_hal.contract.anchor_map.AnchorBoundMap`), from frames alone.

From ``F`` anchor frames in DN at the run's operating point, pixel ``j``'s mean ``m_j`` and sample
std ``s_j`` give, with the photon-transfer calibration's black level ``[B_lo, B_hi]`` and gain
``[g_lo, g_hi]`` (its intervals, never a profile's figures),

    b_j = g_lo max(0, m_j - t s_j / sqrt(F) - B_hi),     u_j = g_hi (m_j + t s_j / sqrt(F) - B_lo),

with ``t`` Student's quantile of ``F - 1`` degrees of freedom at ``alpha / (2 P)`` over the ``P``
pixels of the sensor: by the union bound (Bonferroni), ``b_j <= lambda_j <= u_j`` holds at every
pixel simultaneously with probability at least ``1 - alpha`` (less the black-level and gain
intervals' own error rates, stated by the calibration). A pixel that clipped in any frame gets an
infinite upper bound (never kept). The map is written next to the calibration file
(``<calibration>.anchor-map.npz``) with the operating point it holds at.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy import stats

from ..contract.anchor_map import AnchorBoundMap
from ..contract.errors import CalibrationError
from .schema import Calibration

DEFAULT_ANCHOR_FRAMES = 64
DEFAULT_ALPHA = 0.01


def anchor_map_path(calibration_path: str | Path) -> Path:
    """Where the anchor map of the calibration at ``calibration_path`` lives."""
    path = Path(calibration_path)
    return path.with_name(path.stem + ".anchor-map.npz")


def bounds_from_frames(
    frames_dn, max_dn: float, black_dn: tuple[float, float], gain: tuple[float, float], alpha: float, source: str
) -> AnchorBoundMap:
    """The map from an iterable of frames ``(P,)`` in DN (module docstring)."""
    frames = iter(frames_dn)
    first = next(frames, None)
    if first is None:
        raise CalibrationError("anchor map: need at least 2 frames, got 0")
    total = np.array(first, dtype=np.float64)
    squares, clipped, count = total * total, (total >= max_dn) | (total <= 0), 1
    for frame in frames:
        frame = np.asarray(frame, dtype=np.float64)
        total += frame
        squares += frame * frame
        clipped |= (frame >= max_dn) | (frame <= 0)
        count += 1
    if count < 2:
        raise CalibrationError(f"anchor map: need at least 2 frames, got {count}")
    mean = total / count
    std = np.sqrt(np.maximum(squares / count - mean * mean, 0.0) * count / (count - 1))
    t = float(stats.t.isf(alpha / (2 * mean.size), count - 1))
    margin = t * std / np.sqrt(count)
    lower = gain[0] * np.maximum(mean - margin - black_dn[1], 0.0)
    upper = np.where(clipped, np.inf, gain[1] * (mean + margin - black_dn[0]))
    estimate = (mean - 0.5 * (black_dn[0] + black_dn[1])) * 0.5 * (gain[0] + gain[1])
    return AnchorBoundMap(lower, upper, estimate, confidence=1 - alpha, frames=count, source=source)


def measure_anchor_map(
    device, calibration: Calibration, frames: int = DEFAULT_ANCHOR_FRAMES, alpha: float = DEFAULT_ALPHA
) -> AnchorBoundMap:
    """Read ``frames`` speckle-anchor frames of the whole sensor from ``device`` and bound every pixel."""
    if not (isinstance(frames, int) and frames >= 2):
        raise CalibrationError(f"anchor map: frames must be an integer >= 2, got {frames!r}")
    black, gain = calibration.black_level_dn, calibration.gain_e_per_dn
    source = (
        f"calibration anchor map ({frames} frames, per-pixel lower bounds simultaneous over every pixel at "
        f"{1 - alpha:.0%}, Bonferroni; black level and gain at their {gain.level:.0%} intervals)"
    )
    return bounds_from_frames(
        device.anchor_frames(frames),
        device.sensor.max_dn,
        (black.lower, black.upper),
        (gain.lower, gain.upper),
        alpha,
        source,
    )


def save_anchor_map(bounds: AnchorBoundMap, path: Path, temperature_c: float, exposure_us: float) -> Path:
    """Write ``bounds`` and the operating point it holds at (npz, float64)."""
    with open(path, "wb") as handle:
        np.savez(
            handle,
            lower_e=bounds.lower_e,
            upper_e=bounds.upper_e,
            estimate_e=bounds.estimate_e,
            meta=np.array([bounds.confidence, bounds.frames, temperature_c, exposure_us]),
            source=np.array(bounds.source),
        )
    return path


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
