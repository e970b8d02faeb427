"""Digitized speckle counts of a real LightOn OPU from its recorded calibration (no reference beam: the anchor
is a DMD pattern read as speckle), accounted as the simulated OPU's are (:mod:`opu_hal.privacy.digitized_bins`).

The per-pixel map of the anchor read's mean (:mod:`.recorded_anchor_map`, ``b_j <= lambda_j <= u_j`` at every
pixel at once) gives the kept pixels by the simulated path's rule (:func:`~opu_hal.contract.speckle_bins.
select_binned` for draws of ``d`` values: a positive lower bound, an upper bound below the calibration's clip
ceiling, the lower bound at least the threshold) and their mean bins ``[min b, max u]``. The rest of the read's
law is the calibration's box (:mod:`.read_box`): read noise from the quietest pixel's lower bound over EVERY
pixel (so over the kept ones too), gain, black level and full well over their intervals; none from the
profile's keys. A value reads one kept pixel ``2 reads`` times, so a draw of ``n`` values costs ``2 reads
ceil(n / K)`` frames for ``K`` kept pixels, at the datasheet's frame period (:func:`.recorded_plan.frame_time_s`).
"""

from __future__ import annotations

from ..contract.anchor_map import AnchorBoundMap
from ..contract.errors import CalibrationError
from ..contract.noise import DigitizedReadLaw
from ..contract.speckle_bins import BinnedSelection, select_binned
from .anchor_map import anchor_map_path
from .calibrated import CalibratedNoise


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
    try:
        return bounds, select_binned(bounds, noise.clip_ceiling_e(), values=dimension)
    except ValueError as exc:
        raise CalibrationError(f"{noise.path}: {exc}") from None


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
    bins = selection.bins
    return DigitizedReadLaw(
        mean_e=(min(lo for lo, _ in bins), max(hi for _, hi in bins)),
        read_noise_e=box.read_noise_e,
        gain_e_per_dn=box.gain_e_per_dn[0],
        adc_bits=cal.adc_bits,
        black_level_dn=box.black_level_dn[0],
        full_well_e=box.full_well_e[0],
        source=f"{bounds.source}; {selection.kept_pixels} of {bounds.pixels} pixels kept in {len(bins)} mean bin(s) "
        f"of ratio {selection.ratio:g} from {selection.threshold_e:.4g} e-; calibration {noise.path}: read noise from "
        "the quietest pixel's lower bound, gain, black level and full well over their calibrated intervals",
        pixels_per_frame=selection.kept_pixels,
        frame_time_s=frame_time_s,
        gain_e_per_dn_high=box.gain_e_per_dn[1],
        black_level_dn_high=box.black_level_dn[1],
        full_well_e_high=box.full_well_e[1],
        mean_bins=bins,
        kept_pixels=selection.kept_pixels,
        map_pixels=bounds.pixels,
    )
