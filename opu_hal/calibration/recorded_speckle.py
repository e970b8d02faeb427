"""Digitized speckle counts of a real LightOn OPU from its recorded calibration (no reference beam: the anchor
is a DMD pattern read as speckle), accounted as the simulated OPU's are (:mod:`opu_hal.privacy.digitized_bins`).

The per-pixel map of the anchor read's mean (:mod:`.recorded_anchor_map`, ``b_j <= lambda_j <= u_j`` at every
pixel at once) gives the kept pixels by the simulated path's rule (:func:`~opu_hal.contract.speckle_bins.
select_binned` for draws of ``d`` values: a positive lower bound, an upper bound below the calibration's clip
ceiling, the lower bound at least the threshold) and their mean bins ``[min b, max u]``. The rest of the read's
law is the calibration's box (:mod:`.read_box`) narrowed to the kept pixels where the map holds per-pixel
figures: read noise from the smallest of the kept pixels' own lower bounds (each a bound on its pixel at the
calibration's level, simultaneous over the pixels; at least the floor over every pixel), black level the hull
of the kept pixels' own offset intervals (:mod:`.pixel_offset`) and the clip ceiling with the ADC top at the
highest offset; a pixel kept only where its upper bound sits below its own full well's lower bound by the
pooled ceiling's room (:mod:`.pixel_full_well`), the full well from the smallest kept bound; gain over its
interval; none from the profile's keys. A map written before
these arrays falls back to the floor over every pixel and the pooled black level. A value reads one kept
pixel ``2 reads`` times, so a draw of ``n`` values costs ``2 reads ceil(n / K)`` frames for ``K`` kept pixels,
at the datasheet's frame period (:func:`.recorded_plan.frame_time_s`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..contract.anchor_map import AnchorBoundMap, clip_ceiling_e
from ..contract.errors import CalibrationError
from ..contract.noise import DigitizedReadLaw
from ..contract.speckle_bins import BinnedSelection, select_binned
from .anchor_map import anchor_map_path
from .calibrated import CalibratedNoise
from .pixel_read_noise import floor_over_pixels
from .read_box import READ_NOISE_FLOOR_E


def speckle_selection(profile, noise: CalibratedNoise, dimension: int) -> tuple[AnchorBoundMap, BinnedSelection]:
    """The calibration's anchor map at the profile's operating point and its kept pixels and bins for draws of
    ``dimension`` values; refused, naming the file, where the calibration has no map (written before recorded
    calibrations measured one, or without a speckle profile) or no pixel qualifies."""
    celsius, exposure = profile.declared("temperature_c"), profile.declared("exposure_us")
    bounds = noise.anchor_map(celsius, exposure)
    if bounds is None:
        raise CalibrationError(
            f"{noise.path}: no per-pixel map of the speckle anchor ({anchor_map_path(noise.path)} is missing): a "
            "LightOn OPU without a reference beam keeps pixels by their own bounds, and this calibration holds only "
            "pooled anchor figures (written without a speckle profile, or before recorded calibrations measured the "
            f"map). Re-run `opu-hal calibrate {profile.source or 'PROFILE'} --frames-dir DIR --out CAL` with an "
            f"anchor series at {celsius:g} C, {exposure:g} us"
        )
    if bounds.pixels != noise.calibration.pixels:
        raise CalibrationError(
            f"{anchor_map_path(noise.path)}: {bounds.pixels} pixels, the calibration {noise.calibration.pixels}: "
            "re-run `opu-hal calibrate` (the map and the calibration are written together)"
        )
    ceiling = pixel_clip_ceiling_e(noise, bounds)
    bounds = within_own_wells(bounds, noise.calibration.saturation_e.lower - ceiling)
    try:
        return bounds, select_binned(bounds, ceiling, values=dimension)
    except ValueError as exc:
        raise CalibrationError(f"{noise.path}: {exc}") from None


def pixel_clip_ceiling_e(noise: CalibratedNoise, bounds: AnchorBoundMap) -> float:
    """The calibration's clip ceiling (:meth:`.calibrated.CalibratedNoise.clip_ceiling_e`); where the map holds
    each pixel's offset, with the ADC top at ``(2^bits - 1 - max O_hi) g_lo`` and the bottom at ``-min O_lo g_lo``
    over the pixels that may be kept (a positive lower bound, a finite upper one), so no kept read clips."""
    cal = noise.calibration
    if bounds.offset_low_dn is None or bounds.offset_high_dn is None or cal.adc_bits is None:
        return noise.clip_ceiling_e()
    candidates = (bounds.lower_e > 0) & np.isfinite(bounds.upper_e)
    if not candidates.any():
        return noise.clip_ceiling_e()
    gain = cal.gain_e_per_dn.lower
    top = min(cal.saturation_e.lower, ((1 << cal.adc_bits) - 1 - float(bounds.offset_high_dn[candidates].max())) * gain)
    bottom = -max(float(bounds.offset_low_dn[candidates].min()), 0.0) * gain
    return clip_ceiling_e(top, bottom, cal.read_noise_e.upper)


def within_own_wells(bounds: AnchorBoundMap, margin_e: float) -> AnchorBoundMap:
    """``bounds`` with every pixel whose upper bound lies within ``margin_e`` of its own full well's lower bound
    (:mod:`.pixel_full_well`) made ineligible (lower bound 0): the pooled ceiling's room below the pooled clip
    level, ``margin_e``, is at least what a read of a smaller mean needs below a lower well. Unchanged for a map
    without per-pixel wells."""
    if bounds.full_well_lower_e is None:
        return bounds
    fits = bounds.upper_e + max(margin_e, 0.0) <= bounds.full_well_lower_e
    return replace(bounds, lower_e=np.where(fits, bounds.lower_e, 0.0))


def kept_full_well_e(bounds: AnchorBoundMap, kept: np.ndarray, box: tuple[float, float]) -> tuple[float, float]:
    """The full-well interval of the ``kept`` pixels: from the smaller of the box's lower end and their own
    lower bounds to the box's upper end (the box's where the map holds no per-pixel wells)."""
    if bounds.full_well_lower_e is None:
        return box
    low = min(box[0], float(bounds.full_well_lower_e[kept].min()))
    return low, max(box[1], low)


def kept_read_noise_e(bounds: AnchorBoundMap, kept: np.ndarray, box: tuple[float, float]) -> tuple[float, float]:
    """The read-noise interval of the ``kept`` pixels: from the smallest of their own lower bounds (at least the
    floor over every pixel, a bound on each kept pixel still) to the box's upper end; the box's where the map
    holds no per-pixel bounds (written before them)."""
    if bounds.read_noise_lower_e is None:
        return box
    low = max(floor_over_pixels(bounds.read_noise_lower_e, kept), READ_NOISE_FLOOR_E)
    return low, max(box[1], low)


def kept_black_level_dn(bounds: AnchorBoundMap, kept: np.ndarray, box: tuple[float, float]) -> tuple[float, float]:
    """The black-level interval of the ``kept`` pixels: the hull of their own offset intervals (the box's pooled
    interval where the map holds none)."""
    if bounds.offset_low_dn is None or bounds.offset_high_dn is None:
        return box
    return max(float(bounds.offset_low_dn[kept].min()), 0.0), float(bounds.offset_high_dn[kept].max())


def recorded_speckle_law(profile, noise: CalibratedNoise, dimension: int, frame_time_s: float) -> DigitizedReadLaw:
    """The read law of the kept pixels (module docstring), one mean interval per bin."""
    cal = noise.calibration
    if cal.adc_bits is None:
        raise CalibrationError(
            f"{noise.path}: key 'adc_bits' is missing (a calibration not written from recorded frames): re-run "
            "`opu-hal calibrate PROFILE --frames-dir DIR` (the manifest's bit_depth)"
        )
    bounds, selection = speckle_selection(profile, noise, dimension)
    box = noise.digitized_read_box(profile.declared("temperature_c"))
    bins, kept = selection.bins, selection.kept
    read = kept_read_noise_e(bounds, kept, box.read_noise_e)
    black = kept_black_level_dn(bounds, kept, box.black_level_dn)
    full_well = kept_full_well_e(bounds, kept, box.full_well_e)
    quietest = "kept" if bounds.read_noise_lower_e is not None else "any"
    offsets = "the kept pixels' own offsets" if bounds.offset_low_dn is not None else "its calibrated interval"
    wells = "the kept pixels' own lower bounds" if bounds.full_well_lower_e is not None else "its calibrated interval"
    return DigitizedReadLaw(
        mean_e=(min(lo for lo, _ in bins), max(hi for _, hi in bins)),
        read_noise_e=read,
        gain_e_per_dn=box.gain_e_per_dn[0],
        adc_bits=cal.adc_bits,
        black_level_dn=black[0],
        full_well_e=full_well[0],
        source=f"{bounds.source}; {selection.kept_pixels} of {bounds.pixels} pixels kept in {len(bins)} mean bin(s) "
        f"of ratio {selection.ratio:g} from {selection.threshold_e:.4g} e-; calibration {noise.path}: read noise from "
        f"the quietest {quietest} pixel's lower bound, black level over {offsets}, gain over its calibrated interval, "
        f"full well over {wells}",
        pixels_per_frame=selection.kept_pixels,
        frame_time_s=frame_time_s,
        gain_e_per_dn_high=box.gain_e_per_dn[1],
        black_level_dn_high=black[1],
        full_well_e_high=full_well[1],
        mean_bins=bins,
        kept_pixels=selection.kept_pixels,
        map_pixels=bounds.pixels,
    )
