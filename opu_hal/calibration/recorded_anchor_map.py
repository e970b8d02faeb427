"""The per-pixel anchor map of a speckle anchor from recorded frames (``opu-hal calibrate PROFILE --frames-dir
DIR``): the recorded anchor series at the profile's operating point, streamed frame by frame through
:func:`.anchor_map.bounds_from_frames` with each pixel's own dark offset interval ``[O_lo_j, O_hi_j]``
(:mod:`.pixel_offset`, from the recorded darks at the operating point, never the pooled black level: a pixel
whose offset sits above it would read as more anchor electrons than it has) and the gain interval, so that

    b_j = g_lo d_j <= lambda_j <= g_hi w_j = u_j

at every pixel at once with probability at least ``1 - alpha`` (less the gain interval's own error rate):
the anchor frames take ``alpha / 2`` (the Bernstein bound ``d_j`` of :mod:`.anchor_lower` at ``alpha / (4 P)``
on the lower side, Bonferroni over the ``P`` pixels; on the upper side the Chernoff bound ``w_j`` of
:mod:`.anchor_upper` at a quarter of the anchor frames' share per pixel, each pixel's read-noise variance
bounded from its dark frames at the operating point at another quarter, which both sides use) and the
offsets the other ``alpha / 2``; with each pixel's full well bounded too (:mod:`.pixel_full_well`), the anchor
frames take ``3 alpha / 8`` and the wells ``alpha / 8``. The map stores the
offsets and the calibration's per-pixel read-noise lower bounds (:mod:`.pixel_read_noise`) beside the
bounds. It is written beside the calibration file (``<calibration>.anchor-map.npz``, where
:meth:`.calibrated.CalibratedNoise.anchor_map` reads it) with the operating point it holds at; the
calibration file names it in its notes.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..contract.anchor_map import AnchorBoundMap
from ..contract.errors import CalibrationError
from .anchor_map import DEFAULT_ALPHA, anchor_map_path, bounds_from_frames, upper_level
from .anchor_upper import read_variance_upper_dn2
from .pixel_full_well import full_well_lower_e
from .pixel_offset import FrameMoments, frame_moments, offset_bounds
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


def recorded_series(folder: Path, manifest_temperature_c: float | None = None) -> tuple[list[SeriesFiles], Path]:
    """Every series the folder's manifest lists, and the manifest's path."""
    manifest, where = read_manifest(folder)
    if manifest_temperature_c is not None:
        manifest = manifest.model_copy(update={"temperature_c": float(manifest_temperature_c)})
    return manifest_series(manifest, folder, where), where


def anchor_series(
    folder: Path, temperature_c: float, exposure_us: float, manifest_temperature_c: float | None = None
) -> SeriesFiles:
    """The recorded anchor series at ``temperature_c`` and ``exposure_us`` (the only one there), or why not."""
    listed, where = recorded_series(folder, manifest_temperature_c)
    found = [s for s in listed if s.kind == "anchor" and _at(s, temperature_c) and _same(s.exposure_us, exposure_us)]
    if len(found) != 1:
        raise CalibrationError(
            f"{where}: {len(found)} anchor series (kind 'anchor') at {temperature_c:g} C, {exposure_us:g} us, the "
            "profile's operating point: a speckle anchor's per-pixel map needs exactly one, recorded with the "
            "anchor pattern at that point (32 frames or more; docs/own-camera.md)"
        )
    return found[0]


def dark_series(
    folder: Path, temperature_c: float, exposure_us: float, manifest_temperature_c: float | None = None
) -> tuple[SeriesFiles, SeriesFiles, SeriesFiles]:
    """The dark series at the operating point and the two shortest dark exposures at its temperature (each
    pixel's offset interval, :mod:`.pixel_offset`), or a refusal naming the manifest and what is missing."""
    listed, where = recorded_series(folder, manifest_temperature_c)
    darks = sorted((s for s in listed if s.kind == "dark" and _at(s, temperature_c)), key=lambda s: s.exposure_us)
    at_operating = [s for s in darks if _same(s.exposure_us, exposure_us)]
    exposures = sorted({s.exposure_us for s in darks})
    if len(at_operating) != 1 or len(exposures) < 2:
        raise CalibrationError(
            f"{where}: {len(at_operating)} dark series (kind 'dark') at {temperature_c:g} C, {exposure_us:g} us and "
            f"dark exposures {[f'{e:g}' for e in exposures]} us at {temperature_c:g} C: a speckle anchor's per-pixel "
            "map subtracts each pixel's own dark offset, which needs exactly one dark series at the operating point "
            "and darks at two exposures at least at its temperature (32 frames or more; docs/own-camera.md)"
        )
    first = next(s for s in darks if s.exposure_us == exposures[0])
    second = next(s for s in darks if s.exposure_us == exposures[1])
    return at_operating[0], first, second


def brightest_flat(folder: Path, manifest_temperature_c: float | None = None) -> SeriesFiles | None:
    """The flat series with the most light (photons per pixel where the manifest gives them, else the
    exposure times the relative power): where each pixel's full well is bounded (:mod:`.pixel_full_well`)."""
    listed, _ = recorded_series(folder, manifest_temperature_c)
    flats = [s for s in listed if s.kind == "flat"]
    if flats and all(s.photons > 0 for s in flats):
        return max(flats, key=lambda s: s.photons)
    return max(flats, key=_exposure_power, default=None)


def _exposure_power(series: SeriesFiles) -> float:
    return series.exposure_us * (series.power if series.power is not None else 1.0)


def _at(series: SeriesFiles, temperature_c: float) -> bool:
    return math.isclose(series.temperature_c, temperature_c, abs_tol=1e-9)


def _same(exposure_us: float, other_us: float) -> bool:
    return math.isclose(exposure_us, other_us, rel_tol=1e-9)


def _moments(series: SeriesFiles, bits: int) -> FrameMoments:
    frames = (read_frame(path, bits).ravel() for path in series.files)
    return frame_moments(frames, float((1 << bits) - 1), str(series.files[0].parent))


def recorded_anchor_map(
    series: SeriesFiles,
    darks: tuple[SeriesFiles, SeriesFiles, SeriesFiles],
    calibration: Calibration,
    bits: int,
    alpha: float = DEFAULT_ALPHA,
    read_noise_lower_e: np.ndarray | None = None,
    brightest: SeriesFiles | None = None,
) -> AnchorBoundMap:
    """The map of the anchor ``series`` (module docstring) at ``1 - alpha``: ``alpha / 2`` for the anchor
    frames (``3 alpha / 8`` where the ``brightest`` flat series is given, ``alpha / 8`` then bounding each
    pixel's full well, :mod:`.pixel_full_well`), ``alpha / 2`` for each pixel's offset from ``darks`` (at the
    operating point, the two shortest); frames streamed one at a time.
    ``read_noise_lower_e``: the calibration's per-pixel read-noise bounds."""
    gain = calibration.gain_e_per_dn
    at_operating, first, second = (_moments(s, bits) for s in darks)
    anchor_alpha = alpha / 2 if brightest is None else 3 * alpha / 8
    low, high = offset_bounds(at_operating, (darks[1].exposure_us, first), (darks[2].exposure_us, second), alpha / 2)
    source = (
        f"recorded anchor map ({len(series.files)} frames of {series.files[0].parent}, per-pixel bounds "
        f"simultaneous over every pixel at {1 - alpha:.0%}, Bonferroni; each pixel's own dark offset from "
        f"{at_operating.frames} dark frames at the operating point; gain at its {gain.level:.0%} interval)"
    )
    extra = {"offset_low_dn": low, "offset_high_dn": high}
    if read_noise_lower_e is not None:
        extra["read_noise_lower_e"] = np.asarray(read_noise_lower_e, dtype=np.float64)
    if brightest is not None and (flat := _moments(brightest, bits)).mean.shape == high.shape:
        extra["full_well_lower_e"] = full_well_lower_e(flat, high, gain.lower, alpha / 8)
        source = source[:-1] + f"; each pixel's full well from {flat.frames} frames of the brightest flat)"
    frames = (read_frame(path, bits).ravel() for path in series.files)
    read_var = read_variance_upper_dn2(at_operating, upper_level(anchor_alpha, at_operating.mean.size))
    try:
        bounds = bounds_from_frames(
            frames,
            float((1 << bits) - 1),
            (low, high),
            (gain.lower, gain.upper),
            anchor_alpha,
            source,
            read_var_dn2=read_var,
            **extra,
        )
    except ValueError:  # arrays of two shapes: the anchor frames hold another number of pixels
        bounds = None
    if bounds is None or bounds.pixels != calibration.pixels:
        raise CalibrationError(
            f"{series.files[0]}: {'another number of' if bounds is None else bounds.pixels} pixels a frame, the "
            f"calibrated frames have {calibration.pixels}"
        )
    return replace(bounds, confidence=1 - alpha)


def measure_recorded_anchor_map(
    folder: str | os.PathLike[str],
    calibration: Calibration,
    profile,
    temperature_c: float | None = None,
    read_noise_lower_e: np.ndarray | None = None,
) -> tuple[AnchorBoundMap, float, float] | None:
    """For a ``profile`` with a speckle anchor (:func:`has_speckle_anchor`), its map at the profile's operating
    point and that point; None for any other profile. ``temperature_c``: an EMVA descriptor's temperature;
    ``read_noise_lower_e``: the calibration's per-pixel read-noise bounds, stored with the map."""
    if not has_speckle_anchor(profile):
        return None
    if calibration.adc_bits is None:
        raise CalibrationError("anchor map: the calibration states no adc_bits (not written from recorded frames)")
    celsius, exposure = operating_point(profile)
    where = Path(folder).expanduser()
    series = anchor_series(where, celsius, exposure, temperature_c)
    darks = dark_series(where, celsius, exposure, temperature_c)
    return (
        recorded_anchor_map(
            series,
            darks,
            calibration,
            calibration.adc_bits,
            read_noise_lower_e=read_noise_lower_e,
            brightest=brightest_flat(where, temperature_c),
        ),
        celsius,
        exposure,
    )


def map_note(out: str | os.PathLike[str], bounds: AnchorBoundMap, temperature_c: float, exposure_us: float) -> str:
    """The calibration's note naming the map written beside it."""
    return (
        f"speckle anchor map: per-pixel bounds of {bounds.pixels} pixels from {bounds.frames} recorded anchor frames "
        f"at {temperature_c:g} C, {exposure_us:g} us, in {anchor_map_path(Path(out)).name}"
    )
