"""The per-pixel anchor map of a speckle anchor from recorded frames (``opu-hal calibrate PROFILE --frames-dir
DIR``): the recorded anchor series at the profile's operating point, streamed frame by frame through
:func:`.anchor_map.bounds_from_frames` with the calibration's black-level and gain intervals, so that

    b_j = g_lo max(0, m_j - t s_j / sqrt(F) - B_hi) <= lambda_j <= g_hi (m_j + t s_j / sqrt(F) - B_lo) = u_j

at every pixel at once (Bonferroni over the ``P`` pixels, Student's ``t`` at ``alpha / (2 P)`` with ``F - 1``
degrees of freedom), exactly as a simulated device's own map (:mod:`.anchor_map`). The map is written beside
the calibration file (``<calibration>.anchor-map.npz``, where :meth:`.calibrated.CalibratedNoise.anchor_map`
reads it) with the operating point it holds at; the calibration file names it in its notes.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from ..contract.anchor_map import AnchorBoundMap
from ..contract.errors import CalibrationError
from .anchor_map import DEFAULT_ALPHA, anchor_map_path, bounds_from_frames
from .recorded_images import read_frame
from .recorded_manifest import SeriesFiles, manifest_series, read_manifest
from .schema import Calibration


def has_speckle_anchor(profile) -> bool:
    """Whether ``profile`` is a LightOn OPU whose privacy anchor is a DMD pattern read as speckle (no reference
    beam: no ``anchor_power_uw``). A simulated profile's speckle spans ``sensor_pixels``, not the recorded
    region: its map comes from its own sweep (:func:`.anchor_map.calibrate_anchor_map`)."""
    return profile is not None and profile.backend == "lighton" and getattr(profile, "anchor_power_uw", None) is None


def operating_point(profile) -> tuple[float, float]:
    """The profile's declared ``(temperature_c, exposure_us)``: where its privacy reads are taken."""
    point: list[float] = []
    for key in ("temperature_c", "exposure_us"):
        value = getattr(profile, key, None)
        if value is None:
            raise CalibrationError(
                f"profile {profile.label!r}: key {key!r} is unset: the speckle anchor's per-pixel map is measured "
                "at the profile's operating point (temperature_c, exposure_us)"
            )
        point.append(float(value))
    return point[0], point[1]


def anchor_series(
    folder: Path, temperature_c: float, exposure_us: float, manifest_temperature_c: float | None = None
) -> SeriesFiles:
    """The recorded anchor series at ``temperature_c`` and ``exposure_us`` (the only one there), or why not."""
    manifest, where = read_manifest(folder)
    if manifest_temperature_c is not None:
        manifest = manifest.model_copy(update={"temperature_c": float(manifest_temperature_c)})
    found = [
        s
        for s in manifest_series(manifest, folder, where)
        if s.kind == "anchor"
        and math.isclose(s.temperature_c, temperature_c, abs_tol=1e-9)
        and math.isclose(s.exposure_us, exposure_us, rel_tol=1e-9)
    ]
    if len(found) != 1:
        raise CalibrationError(
            f"{where}: {len(found)} anchor series (kind 'anchor') at {temperature_c:g} C, {exposure_us:g} us, the "
            "profile's operating point: a speckle anchor's per-pixel map needs exactly one, recorded with the "
            "anchor pattern at that point (32 frames or more; docs/own-camera.md)"
        )
    return found[0]


def recorded_anchor_map(
    series: SeriesFiles, calibration: Calibration, bits: int, alpha: float = DEFAULT_ALPHA
) -> AnchorBoundMap:
    """The map of the anchor ``series`` (module docstring): its frames streamed, one at a time."""
    black, gain = calibration.black_level_dn, calibration.gain_e_per_dn
    source = (
        f"recorded anchor map ({len(series.files)} frames of {series.files[0].parent}, per-pixel bounds "
        f"simultaneous over every pixel at {1 - alpha:.0%}, Bonferroni; black level and gain at their "
        f"{gain.level:.0%} intervals)"
    )
    frames = (read_frame(path, bits).ravel() for path in series.files)
    bounds = bounds_from_frames(
        frames, float((1 << bits) - 1), (black.lower, black.upper), (gain.lower, gain.upper), alpha, source
    )
    if bounds.pixels != calibration.pixels:
        raise CalibrationError(
            f"{series.files[0]}: {bounds.pixels} pixels a frame, the calibrated frames have {calibration.pixels}"
        )
    return bounds


def measure_recorded_anchor_map(
    folder: str | os.PathLike[str], calibration: Calibration, profile, temperature_c: float | None = None
) -> tuple[AnchorBoundMap, float, float] | None:
    """For a ``profile`` with a speckle anchor (:func:`has_speckle_anchor`), its map at the profile's operating
    point and that point; None for any other profile. ``temperature_c``: an EMVA descriptor's temperature."""
    if not has_speckle_anchor(profile):
        return None
    if calibration.adc_bits is None:
        raise CalibrationError("anchor map: the calibration states no adc_bits (not written from recorded frames)")
    celsius, exposure = operating_point(profile)
    series = anchor_series(Path(folder).expanduser(), celsius, exposure, temperature_c)
    return recorded_anchor_map(series, calibration, calibration.adc_bits), celsius, exposure


def map_note(out: str | os.PathLike[str], bounds: AnchorBoundMap, temperature_c: float, exposure_us: float) -> str:
    """The calibration's note naming the map written beside it."""
    return (
        f"speckle anchor map: per-pixel bounds of {bounds.pixels} pixels from {bounds.frames} recorded anchor frames "
        f"at {temperature_c:g} C, {exposure_us:g} us, in {anchor_map_path(Path(out)).name}"
    )
