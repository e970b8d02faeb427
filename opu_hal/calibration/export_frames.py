"""Record a device's camera frames into a folder as a lab would (``.npy`` files and a ``manifest.toml``),
for :func:`.recorded.calibrate_frames_dir`: the round trip that tests the recorded route on a simulated
camera whose parameters are hidden from the calibration.

The series are the ones the docs ask a lab to record (docs/calibration.md, "Calibrate your own camera"):
darks at every temperature and exposure, a photon-transfer sweep of flat frames at the first temperature
and exposure (``levels`` illuminations up to :data:`.frames.PTC_TOP` times the saturation power, found by
:func:`.frames.saturation_power`), and anchor frames at every temperature and operating exposure: the flat
reference beam, or with ``speckle_anchor`` the speckle anchor's pattern as a LightOn OPU without a reference
beam records it (each pixel at its own mean; a profile with ``privacy_anchor = "speckle"`` whose sensor is
the region read, ``sensor_pixels = out_features``, at the profile's exposure).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .frames import PTC_START_FRACTION, PTC_TOP, _saturation_search, saturation_power, series


def _write_frames(folder: Path, name: str, frames: np.ndarray) -> str:
    """``frames`` (n, pixels) as ``name/0000.npy`` ...; the glob that lists them."""
    (folder / name).mkdir(parents=True, exist_ok=True)
    for i, frame in enumerate(frames):
        np.save(folder / name / f"{i:04d}.npy", frame.astype(np.uint16 if frame.max() > 255 else np.uint8))
    return f"{name}/*.npy"


def _entry(kind: str, exposure: float, celsius: float, files: str, **extra: float | None) -> str:
    lines = ["[[series]]", f'kind = "{kind}"', f"exposure_us = {exposure!r}", f"temperature_c = {celsius!r}"]
    lines += [f"{key} = {value!r}" for key, value in extra.items() if value is not None]
    return "\n".join([*lines, f"files = {json.dumps(files)}", ""])


def export_frames(
    device,
    folder: str | Path,
    temperatures: Sequence[float],
    exposures: Sequence[float],
    dark_exposures: Sequence[float],
    frames: int = 8,
    levels: int = 60,
    anchor_frames: int | None = None,
    speckle_anchor: bool = False,
    pixel_offset_dn: np.ndarray | None = None,
) -> Path:
    """Record ``device``'s frames into ``folder`` (``anchor_frames`` per anchor series, default ``frames``; the
    speckle anchor's with ``speckle_anchor``, else the reference beam's); returns the manifest's path.
    ``pixel_offset_dn``: non-negative integer DN added to each pixel of every frame written, a fixed-pattern
    dark offset (DSNU's offset part) on top of the device's one black level, clipped at the ADC's top (a read
    the device clipped there stays clipped: exact unless the device clipped a read at 0); None: none."""
    if pixel_offset_dn is not None and not (
        np.issubdtype(np.asarray(pixel_offset_dn).dtype, np.integer) and np.min(pixel_offset_dn) >= 0
    ):
        raise ValueError("pixel_offset_dn must be non-negative integers (added after the device's ADC clipped)")
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    profile = device.profile
    t_ref, e_ref = float(temperatures[0]), float(exposures[0])
    probe = device.raw_frames("anchor", 1, exposure_us=e_ref)
    anchor_power = probe.power_uw
    # the ADC's bits: the profile's camera model, else the ADC top the frames report (a LightOn camera's 255: 8)
    bits = getattr(profile, "adc_bits", None) or (probe.max_dn or int(probe.dn.max())).bit_length()
    device.set_options(temperature_c=t_ref)
    dark = series(device, "dark", frames, e_ref)
    search = _saturation_search(device, dark, e_ref, anchor_power * PTC_START_FRACTION, lambda what: None)
    top = saturation_power(search, float(dark.mean.mean())) * PTC_TOP
    text = [f'camera = "{profile.label}"', f"bit_depth = {bits}", ""]

    def _write(folder: Path, name: str, frames: np.ndarray) -> str:
        if pixel_offset_dn is not None:
            frames = np.clip(frames + np.asarray(pixel_offset_dn, dtype=np.int64), 0, (1 << bits) - 1)
        return _write_frames(folder, name, frames)

    for i in range(1, levels + 1):
        power = top * i / levels
        raw = device.raw_frames("anchor", frames, exposure_us=e_ref, anchor_power_uw=power)
        files = _write(out, f"flat_{i:03d}", raw.dn.numpy())
        text.append(_entry("flat", e_ref, t_ref, files, photons_per_pixel=raw.photons_per_pixel, power=power))
    for celsius in temperatures:
        device.set_options(temperature_c=float(celsius))
        for exposure in sorted({*map(float, exposures), *map(float, dark_exposures)}):
            files = _write(
                out,
                f"dark_{celsius:g}C_{exposure:g}us",
                device.raw_frames("dark", frames, exposure_us=exposure).dn.numpy(),
            )
            text.append(_entry("dark", exposure, float(celsius), files))
        for exposure in map(float, exposures):
            dn = _anchor_dn(device, anchor_frames or frames, exposure, anchor_power, speckle_anchor)
            files = _write(out, f"anchor_{celsius:g}C_{exposure:g}us", dn)
            text.append(_entry("anchor", exposure, float(celsius), files, power=anchor_power))
    manifest = out / "manifest.toml"
    manifest.write_text("\n".join(text), encoding="utf-8")
    return manifest


def _anchor_dn(device, frames: int, exposure_us: float, power: float, speckle: bool) -> np.ndarray:
    """``frames`` anchor frames (frames, pixels) in DN: the reference beam, or the speckle anchor's pattern."""
    profile = device.profile
    if not speckle:
        return device.raw_frames("anchor", frames, exposure_us=exposure_us, anchor_power_uw=power).dn.numpy()
    if (
        getattr(profile, "privacy_anchor", None) != "speckle"
        or profile.sensor_pixels != profile.out_features
        or exposure_us != profile.exposure_us
    ):
        raise ValueError(
            f"profile {profile.label!r}: a speckle anchor is exported from privacy_anchor = 'speckle' over the "
            f"region read (sensor_pixels = out_features, got {profile.sensor_pixels} and {profile.out_features}) at "
            f"the profile's exposure ({profile.exposure_us:g} us, asked {exposure_us:g} us)"
        )
    return np.stack(list(device.anchor_frames(frames)))
