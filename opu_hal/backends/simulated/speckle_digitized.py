"""Digitized privacy counts from a speckle anchor (:mod:`opu_hal.privacy.digitized_bins`): each value's two
counts sum ``reads`` digitized reads of ONE kept pixel, drawn at that pixel's TRUE mean through the camera
(Poisson electrons, full well, read noise, gain, black level, ADC range) from the secure generator, so a
bound that misses a pixel's mean shows; the law accounted is the calibration's box per bin of kept means.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ...contract.anchor_map import AnchorBoundMap
from ...contract.calibration import ReadBox
from ...contract.errors import CalibrationError, DeviceUnavailable
from ...contract.noise import DigitizedReadLaw, NoiseDistribution, PrivacyCounts
from ...contract.speckle_bins import BinnedSelection
from ...kernels.compiled import compute_threads
from ...randomness.secure_random import SecureGenerator
from ...runtime.compute import compiled_ready
from .camera import Sensor
from .privacy_noise import clip_probability
from .speckle_privacy import SpecklePrivacy, sensor_ceiling_e

CHUNK_READS = 1 << 22  # reads drawn at once


def calibrated_bounds(
    calibration: Any, label: str, temperature_c: float, exposure_us: float
) -> tuple[AnchorBoundMap, float]:
    """The calibration's per-pixel bound map of the speckle anchor and its clip ceiling [e-], or why not."""
    if not all(callable(getattr(calibration, n, None)) for n in ("clip_ceiling_e", "anchor_map")):
        raise CalibrationError(
            f"this calibration ({type(calibration).__name__}) has no anchor map: the speckle privacy source needs one"
        )
    bounds = calibration.anchor_map(temperature_c, exposure_us)
    if bounds is None:
        raise CalibrationError(
            f"profile {label!r}: the calibration has no per-pixel map of the speckle anchor; re-run "
            "`opu-hal calibrate` (it measures one for a speckle profile)"
        )
    return bounds, float(calibration.clip_ceiling_e())


def speckle_law(
    sensor: Sensor,
    selection: BinnedSelection,
    box: ReadBox | None,
    label: str,
    source: str,
    frame_time_s: float,
    map_pixels: int | None = None,
) -> DigitizedReadLaw:
    """The law of the kept pixels' reads: mean bins from the bound map, the rest of the camera from the
    calibration's ``box`` (its read noise, gain, black level and full well intervals), or the profile's camera
    without one; a box missing the simulated camera's truth is refused (it would account another camera)."""
    if not (6 <= sensor.adc_bits <= 16 and sensor.read_noise_e > 0):
        raise DeviceUnavailable(
            f"profile {label!r}: digitized privacy noise is accounted for adc_bits in [6, 16] "
            f"and read_noise_e > 0; got {sensor.adc_bits} bits, {sensor.read_noise_e} e-"
        )
    point = (sensor.read_noise_e,) * 2, (sensor.gain_e_per_dn,) * 2, (float(sensor.black_level_dn),) * 2
    noise, gain, black = point if box is None else (box.read_noise_e, box.gain_e_per_dn, box.black_level_dn)
    full_well = (sensor.full_well_e,) * 2 if box is None else box.full_well_e
    for name, (low, high), truth in (
        ("read noise [e-]", noise, sensor.read_noise_e),
        ("gain [e-/DN]", gain, sensor.gain_e_per_dn),
        ("black level [DN]", black, sensor.black_level_dn),
    ):
        if not low <= truth <= high:
            raise DeviceUnavailable(
                f"profile {label!r}: the calibration's {name} interval [{low:.4g}, {high:.4g}] misses the "
                f"camera's {truth:.4g}; re-run `opu-hal calibrate`"
            )
    bins = selection.bins
    return DigitizedReadLaw(
        mean_e=(min(lo for lo, _ in bins), max(hi for _, hi in bins)),
        read_noise_e=noise,
        gain_e_per_dn=gain[0],
        adc_bits=sensor.adc_bits,
        black_level_dn=black[0],
        full_well_e=full_well[0],
        source=f"{source}; {selection.kept_pixels} kept speckle pixels in {len(bins)} mean bin(s) of ratio "
        f"{selection.ratio:g} from {selection.threshold_e:.4g} e-" + ("" if box is None else f"; {box.source}"),
        pixels_per_frame=selection.kept_pixels,
        frame_time_s=frame_time_s,
        gain_e_per_dn_high=gain[1],
        black_level_dn_high=black[1],
        full_well_e_high=full_well[1],
        mean_bins=bins,
        kept_pixels=selection.kept_pixels,
        map_pixels=map_pixels,
    )


def pixel_counts(
    generator: SecureGenerator, sensor: Sensor, means_e: np.ndarray, reads: int, per_read: np.ndarray | None = None
) -> np.ndarray:
    """``K_i = C_1 - C_2`` at each of ``means_e`` (one pixel's true mean per value), each count the sum of
    ``reads`` digitized reads (eq. 1 of :mod:`opu_hal.privacy.digitized`), every draw secure. ``per_read``,
    where given, is ``np.repeat(means_e, 2 reads)`` computed once (:class:`.speckle_privacy.ValueMeans`)."""
    out = np.empty(means_e.size, dtype=np.int64)
    per = max(1, CHUNK_READS // (2 * reads))
    compiled = compiled_ready(torch.device("cpu"))
    if compiled:
        from ...kernels.compiled.digitized_reads import count_differences
    for start in range(0, means_e.size, per):
        if per_read is None:
            lam = np.repeat(means_e[start : start + per], 2 * reads)
        else:
            lam = per_read[2 * reads * start : 2 * reads * min(means_e.size, start + per)]
        electrons, normals = generator.poisson_at(lam), generator.standard_normal(lam.size).numpy()
        chunk = out[start : start + per]
        if compiled:
            with compute_threads():
                count_differences(
                    electrons,
                    normals,
                    reads,
                    float(sensor.full_well_e),
                    float(sensor.read_noise_e),
                    float(sensor.gain_e_per_dn),
                    float(sensor.black_level_dn),
                    float(sensor.max_dn),
                    chunk,
                )
        else:
            chunk[:] = numpy_differences(electrons, normals, reads, sensor)
    return out


def numpy_differences(electrons: np.ndarray, normals: np.ndarray, reads: int, sensor: Sensor) -> np.ndarray:
    """:func:`opu_hal.kernels.compiled.digitized_reads.count_differences` in numpy (without Numba)."""
    signal = np.minimum(electrons.astype(np.float64), sensor.full_well_e)
    signal += sensor.read_noise_e * normals.astype(np.float64)
    dn = np.clip(np.rint(signal / sensor.gain_e_per_dn) + sensor.black_level_dn, 0, sensor.max_dn)
    counts = dn.astype(np.int64).reshape(-1, 2, reads).sum(axis=2)
    return counts[:, 0] - counts[:, 1]


def draw_speckle_digitized(
    speckle: SpecklePrivacy,
    generator: SecureGenerator,
    sensor: Sensor,
    bounds: AnchorBoundMap,
    selection: BinnedSelection,
    law: DigitizedReadLaw,
    means_e: np.ndarray,
    n_values: int,
    reads: int,
    camera: torch.Generator,
) -> PrivacyCounts:
    """``n_values`` values of ``reads`` reads per count at their pixels' true means, after the drift watch;
    refused where a kept pixel's true mean lies outside its bounds or above the sensor's clip ceiling."""
    if not (isinstance(reads, int) and reads >= 1 and isinstance(n_values, int) and n_values >= 1):
        raise DeviceUnavailable(f"need integers n_values >= 1 and reads >= 1, got {n_values!r}, {reads!r}")
    speckle.watch(means_e, bounds, selection.kept, sensor, camera)
    means = speckle.value_means(selection, bounds, means_e, n_values, reads)
    if means.kept_outside or not means.kept_max <= sensor_ceiling_e(sensor):
        raise DeviceUnavailable(
            f"profile {speckle.label!r}: {means.kept_outside} kept pixel(s)' true anchor mean lie outside "
            f"their bounds, or above the clip ceiling {sensor_ceiling_e(sensor):.4g} e- ({bounds.source}); "
            "re-run `opu-hal calibrate`"
        )
    counts = pixel_counts(generator, sensor, means.values, reads, means.per_read)
    speckle.draws += 1
    frames = law.frames(n_values, reads)
    distribution = NoiseDistribution(
        kind="digitized-reads",
        generator=generator.name,
        poisson_mean=means.mean,
        poisson_mean_lower=min(law.mean_e[0], means.minimum),
        reads_per_value=reads,
        read_noise_e=law.read_noise_e[0],  # the accounted (calibrated) low ends, not the simulator's truth
        gain_e_per_dn=law.gain_e_per_dn,
        lattice_step=1.0,
        clip_probability=clip_probability(means.kept_max, sensor),
        mean_source=law.source,
        frames=frames,
        camera_seconds=frames * law.frame_time_s,
        kept_pixels=selection.kept_pixels,
        anchor_checks=len(speckle.checks),
        anchor_check_every=speckle.check_every,
        mean_bins=len(selection.bins),
    )
    return PrivacyCounts(counts=torch.from_numpy(counts), distribution=distribution)
