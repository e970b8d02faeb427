"""Acquisition: the frames a calibration measures, reduced to per-pixel statistics on the fly.

A device offers raw frames through ``device.raw_frames(illumination, n_frames, exposure_us=...,
anchor_power_uw=...)`` (the simulated camera; on LightOn hardware the SDK's raw intensity output)
and its temperature through ``device.set_options(temperature_c=...)`` (the
structure refactor). Per series only the per-pixel mean and temporal variance (``ddof = 1``) are
kept (EMVA 1288 needs no more), so memory does not grow with the frame count.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..contract.errors import CalibrationError
from ..runtime.memory import available_bytes, gib

Progress = Callable[[int, int, str], None]  # (done, total, what)
PTC_START_FRACTION = 2.0**-6  # first level of the search for saturation, of the profile's anchor power
PTC_STEP = 2.0**0.5  # power ratio between the search's levels
PTC_MAX_LEVELS = 48  # of the search
PTC_LEVELS = 72  # photon-transfer levels, equally spaced in power (EMVA 1288: >= 50 up to saturation)
PTC_TOP = 1.15  # the sweep's top, over the estimated saturation power (its last levels show the plateau)
SEARCH_FRAMES = 2
PTC_FRAME_SHARE = 20  # the sweep takes as many frames as this many series of --frames (EMVA 1288: 2 a level)


def sweep_frames(frames: int) -> int:
    """Frames per photon-transfer level: the sweep's frames spread over its levels, at least 2."""
    return max(2, math.ceil(frames * PTC_FRAME_SHARE / PTC_LEVELS))


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
            f"must fit in half of the {gib(available_bytes())} available), got {frames}"
        )


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
    reads_at_top: int | None = None  # reads at the ADC top, max_dn (None: not counted)


@dataclass
class Acquisition:
    """Everything measured: a photon-transfer sweep at the reference point, dark series on the
    (temperature, exposure) grid, anchor-only series at the operating exposures. ``ptc_darks``, when
    given, is the dark series matched to each sweep level (an EMVA 1288 sweep that varies the
    exposure has a dark per level, :mod:`.emva_sweep`); otherwise ``ptc_dark`` serves every level."""

    reference_temperature_c: float
    reference_exposure_us: float
    ptc_dark: SeriesStats
    ptc: list[SeriesStats]
    dark: list[SeriesStats] = field(default_factory=list)
    anchor: list[SeriesStats] = field(default_factory=list)
    frames_total: int = 0
    pixels: int = 0
    max_dn: int | None = None
    ptc_darks: list[SeriesStats] | None = None

    def level_darks(self) -> list[SeriesStats]:
        """The dark series subtracted from each photon-transfer level."""
        return list(self.ptc_darks) if self.ptc_darks is not None else [self.ptc_dark] * len(self.ptc)


def series(device, kind: str, frames: int, exposure_us: float, anchor_power_uw: float | None = None) -> SeriesStats:
    """Read ``frames`` raw frames and keep their per-pixel mean and variance."""
    options = {"exposure_us": exposure_us}
    if anchor_power_uw is not None:
        options["anchor_power_uw"] = anchor_power_uw
    raw = device.raw_frames(kind, frames, **options)
    dn = raw.dn.double().numpy()
    return SeriesStats(
        kind=kind,
        temperature_c=raw.temperature_c,
        exposure_us=raw.exposure_us,
        frames=frames,
        mean=dn.mean(axis=0),
        var=dn.var(axis=0, ddof=1),
        photons_per_pixel=raw.photons_per_pixel,
        anchor_power_uw=anchor_power_uw,
        clipped=raw.clipped,
        max_dn=raw.max_dn,
        reads_at_top=int((dn >= raw.max_dn).sum()) if raw.max_dn is not None else None,
    )


def _checked_request(
    device, temperatures: Sequence[float], exposures: Sequence[float], dark_exposures: Sequence[float], frames: int
) -> list[float]:
    """Refuse a calibration the device or the request cannot support; the sorted dark exposures."""
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
    return all_exposures


def _saturation_search(
    device, dark: SeriesStats, exposure: float, power: float, tick: Callable[[str], None]
) -> list[SeriesStats]:
    """Anchor levels of :data:`SEARCH_FRAMES` frames, the power growing by :data:`PTC_STEP`, until the
    mean stops growing twice in a row (saturation); refuses a sweep that never saturates."""
    search: list[SeriesStats] = []
    flat = 0
    for _ in range(PTC_MAX_LEVELS):
        level = series(device, "anchor", SEARCH_FRAMES, exposure, power)
        tick(f"saturation search {power:.3g} uW")
        if search:
            grown = level.mean.mean() - search[-1].mean.mean()
            signal = level.mean.mean() - dark.mean.mean()
            flat = flat + 1 if grown < PLATEAU_RTOL * max(signal, 1e-12) else 0
        search.append(level)
        if flat >= 2:
            return search
        power *= PTC_STEP
    raise CalibrationError(
        f"the photon-transfer sweep did not reach saturation within {PTC_MAX_LEVELS} levels "
        f"(last anchor power {power:.3g} uW)"
    )


def acquire(
    device,
    temperatures: Sequence[float],
    exposures: Sequence[float],
    dark_exposures: Sequence[float],
    frames: int,
    progress: Progress | None = None,
) -> Acquisition:
    """Measure a device: photon transfer at ``temperatures[0]``, ``exposures[0]`` (a quick geometric
    search for the saturation power with :data:`SEARCH_FRAMES` frames a level, then
    :data:`PTC_LEVELS` levels equally spaced up to :data:`PTC_TOP` times it, EMVA 1288's >= 50
    below saturation, continued at the same step until the mean stops growing); dark frames at
    every temperature and exposure (operating and dark-current ones); anchor-only frames at every
    temperature and operating exposure, at the profile's anchor power."""
    all_exposures = _checked_request(device, temperatures, exposures, dark_exposures, frames)
    anchor_power = device.raw_frames("anchor", 1, exposure_us=float(exposures[0])).power_uw  # the operating power
    n_series_grid = len(temperatures) * (len(all_exposures) + len(exposures))
    total = n_series_grid + PTC_LEVELS + PTC_MAX_LEVELS // 4
    done = 0

    def tick(what: str) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(min(done, total), total, what)

    t_ref, e_ref = float(temperatures[0]), float(exposures[0])
    device.set_options(temperature_c=t_ref)
    ptc_dark = series(device, "dark", frames, e_ref)
    search = _saturation_search(device, ptc_dark, e_ref, anchor_power * PTC_START_FRACTION, tick)
    top = saturation_power(search, float(ptc_dark.mean.mean())) * PTC_TOP
    ptc: list[SeriesStats] = []
    for i in range(1, 2 * PTC_LEVELS + 1):  # past the top only while the mean still grows (an uneven field)
        if i > PTC_LEVELS and on_plateau(ptc, float(ptc_dark.mean.mean())):
            break
        ptc.append(series(device, "anchor", sweep_frames(frames), e_ref, top * i / PTC_LEVELS))
        tick(f"photon transfer {top * i / PTC_LEVELS:.3g} uW")
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
    acquisition.frames_total = (
        frames * (1 + len(acquisition.dark) + len(acquisition.anchor))
        + sweep_frames(frames) * len(ptc)
        + SEARCH_FRAMES * len(search)
    )
    acquisition.max_dn = ptc_dark.max_dn
    if not math.isfinite(float(ptc[-1].mean.mean())):
        raise CalibrationError("non-finite frames")
    return acquisition


def on_plateau(levels: list[SeriesStats], dark_dn: float) -> bool:
    """Whether the last three levels' mean grew by less than twice :data:`PLATEAU_RTOL` of the signal."""
    if len(levels) < 3:
        return False
    means = [float(s.mean.mean()) for s in levels[-3:]]
    return means[-1] - means[0] < 2 * PLATEAU_RTOL * max(means[-1] - dark_dn, 1e-12)


def saturation_power(search: list[SeriesStats], dark_dn: float) -> float:
    """The power where the search's mean reaches its plateau, from the response's slope below half of
    it (the response is linear there): ``plateau / slope``."""
    signal = np.array([float(s.mean.mean()) - dark_dn for s in search])
    power = np.array([float(s.anchor_power_uw or 0.0) for s in search])
    plateau = float(signal[-1])
    below = np.flatnonzero((signal > 0) & (signal <= 0.5 * plateau))
    if below.size == 0:
        raise CalibrationError(
            f"the saturation search starts saturated ({signal[0]:.4g} DN over dark at {power[0]:.3g} uW): "
            "lower the anchor power or the exposure"
        )
    slope = float(signal[below] @ power[below] / (power[below] @ power[below]))
    return plateau / slope
