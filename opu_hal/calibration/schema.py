"""The calibration file: a versioned pydantic model, read with a size bound and clear errors.

Every estimate carries its interval, level and method. Privacy uses the side of an interval that
gives *less* noise (:mod:`.calibrated`). ``schema_version`` changes whenever a field's meaning does;
a reader refuses versions it does not know.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..contract.errors import CalibrationError

SCHEMA_VERSION = 1
MAX_FILE_BYTES = 4 << 20


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


class Estimate(_Model):
    """A measured quantity: point estimate, two-sided interval at ``level``, how it was obtained."""

    value: float
    lower: float
    upper: float
    level: float = Field(gt=0.0, lt=1.0)
    method: str
    unit: str = ""

    @model_validator(mode="after")
    def _ordered(self) -> "Estimate":
        if not self.lower <= self.value <= self.upper:
            raise ValueError(f"need lower <= value <= upper, got {self.lower}, {self.value}, {self.upper}")
        return self


class DeviceIdentity(_Model):
    """Which device was measured; a device refuses a calibration whose identity differs."""

    backend: str
    profile: str
    serial: Optional[str] = None
    seed: int
    in_features: int
    out_features: int
    mode: Literal["linear", "intensity"]
    physics: Optional[dict[str, Union[bool, int, float, str, None]]] = Field(
        None, description="the profile's physics keys at calibration (opu_hal.calibration.run.physics_of)")


class OperatingPointCalibration(_Model):
    """What was measured at one (temperature, exposure)."""

    temperature_c: float
    exposure_us: float
    frames: int = Field(ge=2)
    dark_e: Estimate
    dark_e_min_pixel_lower: float = Field(ge=0.0)
    anchor_e: Estimate
    anchor_read_e_min_pixel_lower: float = Field(ge=0.0)
    anchor_power_uw: float = Field(gt=0.0)
    clipped_reads: int = Field(ge=0)


class DarkCurrentPoint(_Model):
    temperature_c: float
    rate_e_per_s: Estimate
    hot_pixels: int = Field(ge=0)


class TemperatureLaw(_Model):
    """Dark current against temperature (:mod:`.temperature`)."""

    dark_fom_na_per_cm2: Estimate
    pixel_area_cm2: float = Field(gt=0.0)
    activation_energy_ev: Optional[Estimate] = None
    doubling_temperature_k: Optional[Estimate] = None
    doubling_reference_c: float = 25.0


class Calibration(_Model):
    """A device calibration: identity, operating points covered, frames used, every estimate."""

    schema_version: Literal[1] = SCHEMA_VERSION
    device: DeviceIdentity
    created: str
    software_version: str
    frames_per_series: int = Field(ge=2)
    frames_total: int = Field(ge=2)
    pixels: int = Field(ge=1)
    temperatures_c: list[float] = Field(min_length=1)
    exposures_us: list[float] = Field(min_length=1)
    dark_exposures_us: list[float] = Field(default_factory=list)
    gain_e_per_dn: Estimate
    read_noise_e: Estimate
    black_level_dn: Estimate
    saturation_e: Estimate
    saturation_limited_by: Literal["full_well", "adc"]
    quantum_efficiency: Optional[Estimate] = None
    photons_per_pixel_per_uw: Optional[float] = Field(
        None, gt=0.0, description="photons per pixel per uW at the first exposure (known illumination)"
    )
    laser_power_uw: Optional[float] = Field(None, gt=0.0)
    anchor_power_uw: Optional[float] = Field(None, gt=0.0)
    dark_current: list[DarkCurrentPoint] = Field(default_factory=list)
    temperature_law: Optional[TemperatureLaw] = None
    operating_points: list[OperatingPointCalibration] = Field(min_length=1)
    notes: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> "Calibration":
        """Distinct, positive grid values; every (temperature, exposure) of the grid measured once;
        dark current, when given, at each calibrated temperature once; a positive gain."""
        if len(set(self.temperatures_c)) != len(self.temperatures_c):
            raise ValueError(f"key 'temperatures_c' must hold distinct values, got {self.temperatures_c}")
        if len(set(self.exposures_us)) != len(self.exposures_us) or min(self.exposures_us) <= 0:
            raise ValueError(f"key 'exposures_us' must hold distinct values > 0, got {self.exposures_us}")
        if not self.gain_e_per_dn.lower > 0:
            raise ValueError(f"key 'gain_e_per_dn.lower' must be > 0, got {self.gain_e_per_dn.lower}")
        grid = [(t, e) for t in self.temperatures_c for e in self.exposures_us]
        problem = _coverage("operating_points", grid, [(p.temperature_c, p.exposure_us) for p in self.operating_points])
        if problem is None and self.dark_current:
            problem = _coverage("dark_current", self.temperatures_c, [d.temperature_c for d in self.dark_current])
        if problem is not None:
            raise ValueError(problem)
        return self

    def point(self, temperature_c: float, exposure_us: float) -> OperatingPointCalibration | None:
        for op in self.operating_points:
            if op.temperature_c == temperature_c and op.exposure_us == exposure_us:
                return op
        return None


def _coverage(key: str, expected: list, found: list) -> str | None:
    """Why ``found`` (the points of ``key``) is not ``expected`` with each point once, or None."""
    if sorted(found) == sorted(expected):
        return None
    missing = sorted(set(expected) - set(found))
    extra = sorted({point for point in found if point not in expected or found.count(point) > 1})
    return (f"key '{key}' must hold one point per calibrated {'(temperature_c, exposure_us)' if key == 'operating_points' else 'temperature_c'}"
            f" ({len(expected)} points), got {len(found)}" + (f"; missing {missing}" if missing else "")
            + (f"; not calibrated or repeated {extra}" if extra else ""))


def write_calibration(calibration: Calibration, path: str | os.PathLike[str]) -> Path:
    """Write ``calibration`` as indented JSON; returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(calibration.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return out


def read_calibration(path: str | os.PathLike[str]) -> Calibration:
    """Read and validate a calibration file; every failure names the file and the key."""
    file = Path(path)
    try:
        size = file.stat().st_size
        if size > MAX_FILE_BYTES:
            raise CalibrationError(f"{file}: {size} bytes is over the {MAX_FILE_BYTES}-byte limit of a calibration file")
        with file.open("rb") as handle:
            data = json.loads(handle.read(MAX_FILE_BYTES + 1).decode("utf-8"))
    except CalibrationError:
        raise
    except (OSError, UnicodeDecodeError) as exc:
        raise CalibrationError(f"{file}: cannot read the calibration file: {exc}") from None
    except json.JSONDecodeError as exc:
        raise CalibrationError(f"{file}: malformed JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CalibrationError(f"{file}: a calibration file holds a JSON object, got {type(data).__name__}")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise CalibrationError(
            f"{file}: key 'schema_version' is {version!r}; this opu-hal reads version {SCHEMA_VERSION} "
            "(re-run `opu-hal calibrate`)"
        )
    try:
        return Calibration.model_validate(data)
    except ValidationError as exc:
        lines = [f"{file}: invalid calibration ({exc.error_count()} problem(s))"]
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            if not key:  # a check across keys names them itself
                lines.append(f"  {err['msg'].removeprefix('Value error, ')}")
                continue
            got = "" if err["type"] == "missing" else f" (got {err.get('input')!r})"
            lines.append(f"  key '{key}': {err['msg']}{got}")
        raise CalibrationError("\n".join(lines)) from None
