"""Acquisition: the frames a calibration measures, reduced to per-pixel statistics on the fly.

A device offers raw frames through ``device.raw_frames(illumination, n_frames, exposure_us=...,
anchor_power_uw=...)`` (the simulated camera; on LightOn hardware the SDK's raw intensity output)
and its temperature through ``device.set_options(temperature_c=...)`` (the
structure refactor). Per series only the per-pixel mean and temporal variance (``ddof = 1``) are
kept (EMVA 1288 needs no more), so memory does not grow with the frame count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..contract.errors import CalibrationError
from ..runtime.memory import available_bytes, gib

Progress = Callable[[int, int, str], None]  # (done, total, what)
PTC_START_FRACTION = 2.0**-6  # first photon-transfer level, of the profile's anchor power
PTC_STEP = 2.0**0.5  # power ratio between photon-transfer levels
PTC_MAX_LEVELS = 48
PLATEAU_RTOL = 2e-3  # a level whose mean grew by less than this (relative) is on the plateau
SERIES_BYTES_PER_PIXEL = 32  # one series' peak per frame and pixel: raw DN, its float64 copy, mean/var temporaries


def max_frames(pixels: int) -> int:
    """The most frames per series whose reads fit in half the memory this process may still use."""
    return int(available_bytes() // 2 // (SERIES_BYTES_PER_PIXEL * max(pixels, 1)))


def check_frames_fit(frames: int, pixels: int) -> None:
    """Refuse, before any frame is read, ``frames`` (per series) outside [2, what fits in memory]."""
    most = max_frames(pixels)
    if not 2 <= frames <= most:
        raise CalibrationError(
            f"frames (per series) must be in [2, {most}] (a variance needs two frames; a series of {pixels}-pixel frames "
            f"must fit in half of the {gib(available_bytes())} available), got {frames}")


@dataclass(frozen=True)
class SeriesStats:
    """Per-pixel statistics of ``frames`` frames of one illumination at one operating point."""

    kind: str
    temperature_c: float
    exposure_us: float
    frames: int
    mean: np.ndarray
    var: np.ndarray
    photons_per_pixel: float | None = None
    anchor_power_uw: float | None = None
    clipped: int = 0
    max_dn: int | None = None


@dataclass
class Acquisition:
    """Everything measured: a photon-transfer sweep at the reference point, dark series on the
    (temperature, exposure) grid, anchor-only series at the operating exposures."""

    reference_temperature_c: float
    reference_exposure_us: float
    ptc_dark: SeriesStats
    ptc: list[SeriesStats]
    dark: list[SeriesStats] = field(default_factory=list)
    anchor: list[SeriesStats] = field(default_factory=list)
    frames_total: int = 0
    pixels: int = 0
    max_dn: int | None = None


def series(device, kind: str, frames: int, exposure_us: float, anchor_power_uw: float | None = None) -> SeriesStats:
    """Read ``frames`` raw frames and keep their per-pixel mean and variance."""
    options = {"exposure_us": exposure_us}
    if anchor_power_uw is not None:
        options["anchor_power_uw"] = anchor_power_uw
    raw = device.raw_frames(kind, frames, **options)
    dn = raw.dn.double().numpy()
    return SeriesStats(
        kind=kind, temperature_c=raw.temperature_c, exposure_us=raw.exposure_us, frames=frames,
        mean=dn.mean(axis=0), var=dn.var(axis=0, ddof=1), photons_per_pixel=raw.photons_per_pixel,
        anchor_power_uw=anchor_power_uw, clipped=raw.clipped, max_dn=raw.max_dn,
    )


def acquire(
    device, temperatures: Sequence[float], exposures: Sequence[float], dark_exposures: Sequence[float],
    frames: int, progress: Progress | None = None,
) -> Acquisition:
    """Measure a device: photon transfer at ``temperatures[0]``, ``exposures[0]``; dark frames at
    every temperature and exposure (operating and dark-current ones); anchor-only frames at every
    temperature and operating exposure, at the profile's anchor power."""
    if not device.capabilities.raw_frames:
        raise CalibrationError(
            f"device {device.profile.label!r} ({device.profile.backend}) offers no raw camera frames; "
            "photon-transfer calibration needs them"
        )
    check_frames_fit(frames, device.profile.out_features)
    if not temperatures or not exposures:
        raise CalibrationError("need at least one temperature and one exposure")
    all_exposures = sorted(set(float(e) for e in exposures) | set(float(e) for e in dark_exposures))
    if len(all_exposures) < 2:
        raise CalibrationError(
            "dark current and black level need dark frames at two exposures at least: add dark_exposures "
            "(extra dark-frame exposures in us, e.g. 100000 1000000)"
        )
    anchor_power = device.raw_frames("anchor", 1, exposure_us=float(exposures[0])).power_uw  # the operating power
    n_series_grid = len(temperatures) * (len(all_exposures) + len(exposures))
    total = n_series_grid + PTC_MAX_LEVELS // 2
    done = 0

    def tick(what: str) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(min(done, total), total, what)

    t_ref, e_ref = float(temperatures[0]), float(exposures[0])
    device.set_options(temperature_c=t_ref)
    ptc_dark = series(device, "dark", frames, e_ref)
    ptc: list[SeriesStats] = []
    power, flat = anchor_power * PTC_START_FRACTION, 0
    for _ in range(PTC_MAX_LEVELS):
        level = series(device, "anchor", frames, e_ref, power)
        tick(f"photon transfer {power:.3g} uW")
        if ptc:
            grown = level.mean.mean() - ptc[-1].mean.mean()
            signal = level.mean.mean() - ptc_dark.mean.mean()
            flat = flat + 1 if grown < PLATEAU_RTOL * max(signal, 1e-12) else 0
        ptc.append(level)
        if flat >= 2:
            break
        power *= PTC_STEP
    else:
        raise CalibrationError(
            f"the photon-transfer sweep did not reach saturation within {PTC_MAX_LEVELS} levels "
            f"(last anchor power {power:.3g} uW)"
        )
    acquisition = Acquisition(t_ref, e_ref, ptc_dark, ptc, pixels=int(ptc_dark.mean.size))
    total = done + n_series_grid
    for celsius in temperatures:
        device.set_options(temperature_c=float(celsius))
        for exposure in all_exposures:
            acquisition.dark.append(series(device, "dark", frames, exposure))
            tick(f"dark {celsius:g} C {exposure:g} us")
        for exposure in exposures:
            acquisition.anchor.append(series(device, "anchor", frames, float(exposure), anchor_power))
            tick(f"anchor {celsius:g} C {exposure:g} us")
    acquisition.frames_total = frames * (1 + len(ptc) + len(acquisition.dark) + len(acquisition.anchor))
    acquisition.max_dn = ptc_dark.max_dn
    if not math.isfinite(float(ptc[-1].mean.mean())):
        raise CalibrationError("non-finite frames")
    return acquisition
