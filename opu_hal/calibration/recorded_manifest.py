"""What a folder of recorded frames says about them: a manifest (``manifest.toml`` or ``manifest.json``)
or an EMVA 1288 descriptor file (the layout the ``emva1288`` package reads and writes).

Manifest keys (every refusal names the file, the key and the allowed range)::

    camera = "lab-camera"          # a label; serial = "..." optional
    bit_depth = 8                  # the ADC's, 6..16
    pixel_pitch_um = 5.5           # optional: the dark figure of merit and irradiance need it
    wavelength_nm = 532.0          # optional: irradiance needs it
    emva_descriptor = "EMVA1288descriptor.txt"   # optional: series listed there too
    temperature_c = 25.0           # the descriptor's series' temperature (a descriptor states none)

    [[series]]
    kind = "dark"                  # "dark", "flat" (photon transfer) or "anchor" (operating point)
    exposure_us = 1000.0
    temperature_c = 25.0
    files = "dark_25C_1000us/*.png"   # a glob, or a list of paths, relative to the folder
    # flat series: photons_per_pixel, or irradiance_w_per_m2 (with pitch and wavelength), or power
    # (a relative illumination, e.g. the source power in uW); anchor series: power optional

An EMVA 1288 descriptor lists ``v version``, ``n bits width height``, then ``b exposure_ns photons`` (bright)
or ``d exposure_ns`` (dark) each followed by two or more ``i path`` lines; paths may use ``\\``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..contract.errors import CalibrationError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MANIFEST_NAMES = ("manifest.toml", "manifest.json")
PLANCK_J_S, LIGHT_M_S = 6.62607015e-34, 299_792_458.0


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


class SeriesEntry(_Model):
    """One series of frames at one (kind, exposure, temperature, illumination)."""

    kind: Literal["dark", "flat", "anchor"]
    exposure_us: float = Field(gt=0.0, le=1e9)
    temperature_c: float | None = Field(None, ge=-273.15, le=200.0)
    files: str | list[str]
    photons_per_pixel: float | None = Field(None, gt=0.0, le=1e9)
    irradiance_w_per_m2: float | None = Field(None, gt=0.0, le=1e6)
    power: float | None = Field(None, gt=0.0, le=1e9)


class Manifest(_Model):
    camera: str = Field(min_length=1, max_length=200)
    serial: str | None = None
    bit_depth: int = Field(ge=6, le=16)
    pixel_pitch_um: float | None = Field(None, gt=0.0, le=100.0)
    wavelength_nm: float | None = Field(None, ge=200.0, le=2000.0)
    temperature_c: float | None = Field(None, ge=-273.15, le=200.0)
    emva_descriptor: str | None = None
    laser_power_uw: float | None = Field(None, gt=0.0)
    anchor_power_uw: float | None = Field(None, gt=0.0)
    series: list[SeriesEntry] = Field(default_factory=list)


@dataclass(frozen=True)
class SeriesFiles:
    """A series resolved: its files, and the photons per pixel (0: dark or not known) and power."""

    kind: str
    exposure_us: float
    temperature_c: float
    files: tuple[Path, ...]
    photons: float
    power: float | None


def read_manifest(folder: Path) -> tuple[Manifest, Path]:
    """The folder's manifest (TOML or JSON), or one built from its single EMVA 1288 descriptor file."""
    if not folder.is_dir():
        raise CalibrationError(f"--frames-dir {folder}: not a folder")
    for name in MANIFEST_NAMES:
        path = folder / name
        if path.is_file():
            return _parse(path), path
    descriptors = [p for p in sorted(folder.glob("*.txt")) if _is_descriptor(p)]
    if len(descriptors) != 1:
        raise CalibrationError(
            f"--frames-dir {folder}: needs a {' or '.join(MANIFEST_NAMES)}, or exactly one EMVA 1288 descriptor "
            f"file (*.txt with an 'n bits width height' line), found {len(descriptors)} descriptor(s)"
        )
    bits = int(_descriptor_lines(descriptors[0])[_format_index(descriptors[0])][1])
    return Manifest(camera=folder.name or "camera", bit_depth=bits, emva_descriptor=descriptors[0].name), descriptors[0]


def _parse(path: Path) -> Manifest:
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CalibrationError(f"{path}: cannot read the manifest: {exc}") from None
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        lines = [f"{path}: invalid manifest ({exc.error_count()} problem(s))"]
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            got = "" if err["type"] == "missing" else f" (got {err.get('input')!r})"
            lines.append(f"  key '{key}': {err['msg']}{got}")
        raise CalibrationError("\n".join(lines)) from None


def _is_descriptor(path: Path) -> bool:
    try:
        return any(line.split()[:1] == ["n"] for line in path.read_text(encoding="utf-8").splitlines()[:50])
    except (OSError, UnicodeDecodeError):
        return False


def _descriptor_lines(path: Path) -> list[list[str]]:
    """The descriptor's non-comment lines, split on whitespace."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CalibrationError(f"{path}: cannot read the EMVA 1288 descriptor: {exc}") from None
    return [line.split() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


def _format_index(path: Path) -> int:
    lines = _descriptor_lines(path)
    found = [i for i, words in enumerate(lines) if words[0] == "n"]
    if len(found) != 1 or len(lines[found[0]]) != 4:
        raise CalibrationError(
            f"{path}: an EMVA 1288 descriptor has one 'n bits width height' line, found {len(found)}"
        )
    bits = lines[found[0]][1]
    if not (bits.isdigit() and 6 <= int(bits) <= 16):
        raise CalibrationError(f"{path}: 'n bits width height': bits must be an integer in [6, 16], got {bits!r}")
    return found[0]


def descriptor_series(path: Path, temperature_c: float) -> list[SeriesFiles]:
    """The series an EMVA 1288 descriptor lists (exposures in ns there, us here); a repeated (exposure,
    photons) point (the standard's spatial sets, after the temporal pairs) is kept once, its first listing."""
    lines = _descriptor_lines(path)
    _format_index(path)
    out: list[SeriesFiles] = []
    seen: set[tuple[float, float]] = set()
    i = 0
    while i < len(lines):
        words, i = lines[i], i + 1
        if words[0] in ("v", "n"):
            continue
        if words[0] not in ("b", "d") or len(words) != (3 if words[0] == "b" else 2):
            raise CalibrationError(
                f"{path}: line {' '.join(words)!r}: expected 'b exposure_ns photons', 'd exposure_ns' or 'i path'"
            )
        try:
            exposure_us = float(words[1].replace(",", ".")) / 1000
            photons = float(words[2].replace(",", ".")) if words[0] == "b" else 0.0
        except ValueError:
            raise CalibrationError(f"{path}: line {' '.join(words)!r}: exposure and photons must be numbers") from None
        files = []
        while i < len(lines) and lines[i][0] == "i":
            files.append(path.parent.joinpath(*" ".join(lines[i][1:]).replace("\\", "/").split("/")))
            i += 1
        if (exposure_us, photons) in seen:
            continue
        seen.add((exposure_us, photons))
        kind = "flat" if photons else "dark"
        out.append(SeriesFiles(kind, exposure_us, temperature_c, tuple(files), photons, None))
    return out


def manifest_series(manifest: Manifest, folder: Path, where: Path) -> list[SeriesFiles]:
    """The manifest's series resolved (files globbed, illumination as photons per pixel where it can be)."""
    out: list[SeriesFiles] = []
    if manifest.emva_descriptor is not None:
        if manifest.temperature_c is None:
            raise CalibrationError(
                f"{where}: an EMVA 1288 descriptor states no temperature; give key 'temperature_c' (C) in a "
                "manifest, or --temperature C"
            )
        out += descriptor_series(folder / manifest.emva_descriptor, manifest.temperature_c)
    for n, entry in enumerate(manifest.series):
        key = f"series.{n}"
        temperature = entry.temperature_c if entry.temperature_c is not None else manifest.temperature_c
        if temperature is None:
            raise CalibrationError(f"{where}: key '{key}.temperature_c' is missing (and no top-level temperature_c)")
        patterns = [entry.files] if isinstance(entry.files, str) else entry.files
        files = tuple(p for pattern in patterns for p in sorted(folder.glob(pattern)) if p.is_file())
        if len(files) < 2:
            raise CalibrationError(
                f"{where}: key '{key}.files' {entry.files!r} matches {len(files)} file(s); need 2 or more"
            )
        out.append(
            SeriesFiles(
                entry.kind, entry.exposure_us, temperature, files, _photons(entry, manifest, where, key), entry.power
            )
        )
    if not out:
        raise CalibrationError(f"{where}: no series (key 'series' or 'emva_descriptor')")
    return out


def _photons(entry: SeriesEntry, manifest: Manifest, where: Path, key: str) -> float:
    """Photons per pixel of a flat series: given, or from the irradiance (``E A t lambda / (h c)``); 0 for
    darks and anchors, and for a flat whose illumination is only a relative ``power``."""
    if entry.kind != "flat":
        return 0.0
    if entry.photons_per_pixel is not None:
        return entry.photons_per_pixel
    if entry.irradiance_w_per_m2 is not None:
        if manifest.pixel_pitch_um is None or manifest.wavelength_nm is None:
            raise CalibrationError(
                f"{where}: key '{key}.irradiance_w_per_m2' needs keys 'pixel_pitch_um' and 'wavelength_nm'"
            )
        area_m2 = (manifest.pixel_pitch_um * 1e-6) ** 2
        joules = entry.irradiance_w_per_m2 * area_m2 * entry.exposure_us * 1e-6
        return joules * manifest.wavelength_nm * 1e-9 / (PLANCK_J_S * LIGHT_M_S)
    if entry.power is None:
        raise CalibrationError(
            f"{where}: key '{key}': a flat series needs photons_per_pixel, irradiance_w_per_m2 or power (a relative "
            "illumination); without photons the quantum efficiency is not identified"
        )
    return 0.0
