"""Calibrate a camera from recorded frames (``opu-hal calibrate --frames-dir DIR``): any camera, no device.

The folder's manifest or EMVA 1288 descriptor (:mod:`.recorded_manifest`) lists dark, flat and anchor
series; their image files (:mod:`.recorded_images`) are reduced to per-pixel statistics and go through
the same estimators as a device's own sweep (:mod:`.photon_transfer`, :mod:`.emva`, :mod:`.temperature`):

- **photon transfer**: the flat series at one temperature (the reference), each with the dark series of
  its exposure subtracted (EMVA 1288's exposure or photon variation; 50 levels or more up to saturation);
- **dark current and its temperature law**: dark series at two exposures or more at each temperature;
- **operating points**: the anchor series (at each dark temperature and operating exposure); without any,
  the flat level nearest half of the brightest one's signal serves as the anchor (EMVA's 50 % level).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..contract.errors import CalibrationError
from .frames import Acquisition, SeriesStats
from .photon_transfer import estimate
from .recorded_images import read_series
from .recorded_manifest import Manifest, SeriesFiles, manifest_series, read_manifest
from .run import DEFAULT_BOOTSTRAP, assemble_measured, profile_identity
from .schema import Calibration, DeviceIdentity


def read_recorded(folder: Path, temperature_c: float | None = None) -> tuple[Manifest, list[SeriesStats]]:
    """The folder's manifest and every series it lists, as per-pixel statistics (frames of one shape)."""
    manifest, where = read_manifest(folder)
    if temperature_c is not None:
        manifest = manifest.model_copy(update={"temperature_c": float(temperature_c)})
    resolved = manifest_series(manifest, folder, where)
    stats: list[SeriesStats] = []
    for entry in resolved:
        shape = None if not stats else (stats[0].mean.size,)
        stats.append(_series(entry, manifest.bit_depth, shape))
    return manifest, stats


def _series(entry: SeriesFiles, bits: int, size: tuple[int, ...] | None) -> SeriesStats:
    series = read_series(
        entry.files, bits, entry.exposure_us, entry.temperature_c, entry.photons, entry.kind, None, entry.power
    )
    if size is not None and series.mean.shape != size:
        raise CalibrationError(f"{entry.files[0]}: {series.mean.size} pixels a frame, the first series has {size[0]}")
    return series


def acquisition_of(series: Sequence[SeriesStats]) -> tuple[Acquisition, list[float], list[float], list[float]]:
    """The acquisition, and the calibrated temperatures, operating exposures and other dark exposures."""
    flats = [s for s in series if s.kind == "flat"]
    darks = [s for s in series if s.kind == "dark"]
    anchors = [s for s in series if s.kind == "anchor"]
    if len({s.temperature_c for s in flats}) != 1:
        raise CalibrationError(
            f"flat series: photon transfer needs every flat series at one temperature, got "
            f"{sorted({s.temperature_c for s in flats}) or 'none'} C"
        )
    reference = flats[0].temperature_c
    flats.sort(key=lambda s: (s.exposure_us, s.photons_per_pixel or 0.0, s.anchor_power_uw or 0.0))
    dark_at = {(s.temperature_c, s.exposure_us): s for s in darks}
    missing = sorted({s.exposure_us for s in flats if (reference, s.exposure_us) not in dark_at})
    if missing:
        raise CalibrationError(f"flat series at {missing} us, {reference:g} C: record a dark series at each of them")
    first = flats[0].exposure_us
    flats = [_relative_power(s, first) for s in flats]
    temperatures = sorted({s.temperature_c for s in darks})
    if not anchors:
        if temperatures != [reference]:
            raise CalibrationError(
                f"dark series at {temperatures} C: with darks at other temperatures than the flats' "
                f"{reference:g} C, record anchor series (kind 'anchor') at each of them"
            )
        half = max(float((s.mean - dark_at[(reference, s.exposure_us)].mean).mean()) for s in flats) / 2
        nearest = min(
            flats, key=lambda s: abs(float((s.mean - dark_at[(reference, s.exposure_us)].mean).mean()) - half)
        )
        anchors = [_as_anchor(nearest)]
    exposures = sorted({s.exposure_us for s in anchors})
    for celsius in temperatures:
        for exposure in exposures:
            for kind, table in (("dark", dark_at), ("anchor", {(s.temperature_c, s.exposure_us): s for s in anchors})):
                if (celsius, exposure) not in table:
                    raise CalibrationError(f"no {kind} series at {celsius:g} C, {exposure:g} us (an operating point)")
    acq = Acquisition(
        reference_temperature_c=reference,
        reference_exposure_us=first,
        ptc_dark=dark_at[(reference, first)],
        ptc=flats,
        dark=sorted(darks, key=lambda s: (s.temperature_c, s.exposure_us)),
        anchor=[_as_anchor(s) for s in anchors],
        frames_total=sum(s.frames for s in series),
        pixels=int(flats[0].mean.size),
        max_dn=flats[0].max_dn,
        ptc_darks=[dark_at[(reference, s.exposure_us)] for s in flats],
    )
    others = sorted({s.exposure_us for s in darks} - set(exposures))
    return acq, temperatures, exposures, others


def _relative_power(flat: SeriesStats, first_exposure_us: float) -> SeriesStats:
    """A flat series' illumination as the linearity fit reads it without photons: power x exposure, in
    units of the power at the first exposure (at one exposure: the power itself)."""
    from dataclasses import replace

    power = flat.anchor_power_uw
    return replace(flat, anchor_power_uw=None if power is None else power * flat.exposure_us / first_exposure_us)


def _as_anchor(series: SeriesStats) -> SeriesStats:
    """An anchor series with a power (1, relative, where the manifest gives none)."""
    from dataclasses import replace

    return replace(series, kind="anchor", anchor_power_uw=series.anchor_power_uw or 1.0)


def calibrate_frames_dir(
    folder: str | os.PathLike[str],
    *,
    profile=None,
    temperature_c: float | None = None,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
) -> Calibration:
    """Calibrate the camera whose frames ``folder`` holds (module docstring). ``profile`` (optional): the
    device the calibration is for (its identity is written, so a device of that profile accepts it);
    ``temperature_c``: the temperature of an EMVA 1288 descriptor's series (it states none)."""
    calibration, _ = calibrate_with_pixels(
        folder, profile=profile, temperature_c=temperature_c, bootstrap=bootstrap, seed=seed
    )
    return calibration


def calibrate_with_pixels(
    folder: str | os.PathLike[str],
    *,
    profile=None,
    temperature_c: float | None = None,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
) -> tuple[Calibration, np.ndarray | None]:
    """:func:`calibrate_frames_dir` and each pixel's read-noise lower bound (e-, simultaneous over the pixels;
    its minimum is the calibration's ``read_noise_e_min_pixel_lower``), which the anchor map stores."""
    path = Path(folder).expanduser()
    manifest, series = read_recorded(path, temperature_c)
    acq, temperatures, exposures, dark_exposures = acquisition_of(series)
    if len({s.exposure_us for s in acq.dark if s.temperature_c == temperatures[0]}) < 2:
        raise CalibrationError(
            f"{path}: dark series at {temperatures[0]:g} C cover one exposure; record darks at two exposures at least "
            "(black level and dark current are a line against the exposure)"
        )
    pt = estimate(acq, bootstrap=bootstrap, seed=seed)
    identity = _identity(manifest, acq.pixels, profile)
    anchor_power = manifest.anchor_power_uw or (getattr(profile, "anchor_power_uw", None) if profile else None)
    calibration = assemble_measured(
        identity,
        (manifest.pixel_pitch_um, manifest.laser_power_uw),
        anchor_power or float(acq.anchor[0].anchor_power_uw or 1.0),
        acq,
        pt,
        temperatures,
        exposures,
        dark_exposures,
    )
    notes = [
        *calibration.notes,
        f"measured from recorded frames in {path} ({acq.frames_total} frames)",
        *([f"camera serial {manifest.serial} (the manifest's)"] if manifest.serial and profile else []),
    ]
    return calibration.model_copy(update={"adc_bits": manifest.bit_depth, "notes": notes}), pt.read_noise_pixel_lower


def _identity(manifest: Manifest, pixels: int, profile) -> DeviceIdentity:
    """The profile's identity when one is given, else the recorded camera's (backend 'recorded')."""
    if profile is not None:
        if profile.out_features != pixels:
            raise CalibrationError(
                f"profile {profile.label!r}: key 'out_features' = {profile.out_features}, but the recorded frames "
                f"have {pixels} pixels: record the camera region the device reads (lightonml: n_components = "
                "out_features), so that every pixel read is calibrated"
            )
        return profile_identity(profile, getattr(profile, "mode", "intensity"))  # a device reads no serial back
    return DeviceIdentity(
        backend="recorded",
        profile=manifest.camera,
        serial=manifest.serial,
        seed=0,
        in_features=1,
        out_features=pixels,
        mode="intensity",
        physics={"bit_depth": manifest.bit_depth, "pixel_pitch_um": manifest.pixel_pitch_um},
    )
