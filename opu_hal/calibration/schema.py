"""The calibration file: a versioned pydantic model, read with a size bound and clear errors.

Every estimate carries its interval, level and method. Privacy uses the side of an interval that
gives *less* noise (:mod:`.calibrated`). ``schema_version`` changes whenever a field's meaning does;
a reader refuses versions it does not know. Version 2 (issue 36) adds the EMVA 1288 (Release 4.0)
quantities (linearity, PRNU, DSNU, defect pixels, the saturation point beside the clip level),
per-pixel extreme anchor bounds and the local temperature law; version 1 files are refused. The
optional ``photon_transfer_curve`` (issue 50: the measured points the calibration figure draws) adds
data without changing a field's meaning: files without it still read, their figure has no points.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..contract.errors import CalibrationError

SCHEMA_VERSION: Literal[2] = 2
OLDER_VERSIONS = {1: "before issue 36: no PRNU, linearity, defect pixels or per-pixel anchor bounds"}
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
    def _ordered(self) -> Estimate:
        if not self.lower <= self.value <= self.upper:
            raise ValueError(f"need lower <= value <= upper, got {self.lower}, {self.value}, {self.upper}")
        return self


class DeviceIdentity(_Model):
    """Which device was measured; a device refuses a calibration whose identity differs."""

    backend: str
    profile: str
    serial: str | None = None
    seed: int
    in_features: int
    out_features: int
    mode: Literal["linear", "intensity"]
    physics: dict[str, bool | int | float | str | list[float] | None] | None = Field(
        None, description="the profile's physics keys at calibration (opu_hal.calibration.run.physics_of)"
    )


class OperatingPointCalibration(_Model):
    """What was measured at one (temperature, exposure)."""

    temperature_c: float
    exposure_us: float
    frames: int = Field(ge=2)
    dark_e: Estimate
    dark_e_min_pixel_lower: float = Field(ge=0.0)
    anchor_e: Estimate
    anchor_read_e_min_pixel_lower: float = Field(ge=0.0)
    anchor_e_min_pixel_lower: float = Field(
        ge=0.0, description="anchor photo-electrons of the dimmest pixel, lower bound"
    )
    anchor_e_max_pixel_upper: float = Field(
        ge=0.0, description="anchor photo-electrons of the brightest pixel, upper bound"
    )
    anchor_power_uw: float = Field(gt=0.0)
    clipped_reads: int = Field(ge=0)


class DarkCurrentPoint(_Model):
    """Dark current at one temperature, both ways EMVA 1288 (Release 4.0) reports it: ``rate_e_per_s``
    over the typical pixels (hot pixels left out: what the temperature law describes) and
    ``rate_all_pixels_e_per_s``, the mean over every pixel (EMVA's ``mu_I.mean`` and a datasheet's
    figure), with the defect-pixel statistics: ``hot_pixels`` counted over all temperatures, and
    this temperature's threshold (a pixel whose rate lies above it is hot here)."""

    temperature_c: float
    rate_e_per_s: Estimate = Field(description="pixel mean over the typical pixels (hot pixels left out)")
    hot_pixels: int = Field(ge=0)
    rate_all_pixels_e_per_s: Estimate | None = Field(
        None, description="pixel mean over every pixel, hot ones included (EMVA 1288 mu_I.mean)"
    )
    hot_threshold_e_per_s: float | None = Field(
        None, description="median rate + hot_threshold_mads robust sds (1.4826 MAD) at this temperature"
    )
    hot_threshold_mads: float | None = Field(None, gt=0.0)


class TemperatureLaw(_Model):
    """Dark current against temperature (:mod:`.temperature`)."""

    dark_fom_na_per_cm2: Estimate
    pixel_area_cm2: float = Field(gt=0.0)
    activation_energy_ev: Estimate | None = None
    doubling_temperature_k: Estimate | None = None
    doubling_reference_c: float = 25.0
    coefficients: list[float] | None = Field(
        None, description="ln(D/T^1.5) = sum c_p (1/kT - x_center)^p (opu_hal.calibration.temperature)"
    )
    x_center_per_ev: float = 0.0
    notes: list[str] = Field(default_factory=list)


class Linearity(_Model):
    """EMVA 1288 linearity: relative deviations (%) of the mean signal from the weighted linear fit
    against the illumination, over 5-95 % of the saturation point."""

    error_min_pct: float
    error_max_pct: float
    levels: int = Field(ge=2)
    against: Literal["photons", "power"]


class DefectPixels(_Model):
    """Defect pixels (EMVA 1288 Release 4.0 sec. 8.3, thresholds stated): ``hot`` from the dark
    current at the hottest temperature, ``dim`` / ``bright`` from the photo-response at about 50 %
    of saturation, each more than ``threshold_mads`` robust standard deviations from the median."""

    hot: int = Field(ge=0)
    dim: int = Field(ge=0)
    bright: int = Field(ge=0)
    threshold_mads: float = Field(gt=0.0)


class Uniformity(_Model):
    """EMVA 1288 spatial nonuniformity from per-pixel means (temporal noise removed): PRNU (% of the
    signal at ~50 % saturation, the flat field being the anchor), DSNU (e-), and the largest pixel
    response over the smooth illumination (upper bound, what a lower bound on noise must use)."""

    prnu_pct: Estimate
    prnu_highpass_pct: Estimate
    dsnu_e: Estimate
    response_max_upper: float = Field(gt=0.0)
    level_fraction: float = Field(gt=0.0, le=1.0)


class PhotonTransferPoint(_Model):
    """One level of the photon-transfer sweep, pixel means: the signal above the level's dark (DN), the
    temporal variance of the lit and of the dark series (DN^2), and whether the gain fit used it."""

    exposure_us: float = Field(ge=0.0)
    anchor_power_uw: float | None = Field(None, ge=0.0)
    signal_dn: float
    variance_dn2: float = Field(ge=0.0)
    dark_variance_dn2: float = Field(ge=0.0)
    in_fit: bool


class Calibration(_Model):
    """A device calibration: identity, operating points covered, frames used, every estimate."""

    schema_version: Literal[2] = SCHEMA_VERSION
    device: DeviceIdentity
    created: str
    software_version: str
    frames_per_series: int = Field(ge=2)
    frames_total: int = Field(ge=2)
    pixels: int = Field(ge=1)
    adc_bits: int | None = Field(
        None, ge=6, le=16, description="the ADC's bit depth of recorded frames (their manifest's bit_depth)"
    )
    temperatures_c: list[float] = Field(min_length=1)
    exposures_us: list[float] = Field(min_length=1)
    dark_exposures_us: list[float] = Field(default_factory=list)
    gain_e_per_dn: Estimate
    read_noise_e: Estimate
    read_noise_e_min_pixel_lower: float | None = Field(
        None,
        ge=0.0,
        description="lower bound on the quietest pixel's read noise (opu_hal.calibration.pixel_read_noise)",
    )
    black_level_dn: Estimate
    saturation_e: Estimate
    saturation_limited_by: Literal["full_well", "adc"]
    saturation_point_e: Estimate = Field(description="EMVA 1288 saturation capacity: the level of largest variance")
    illumination_levels: int = Field(ge=2)
    linearity: Linearity
    uniformity: Uniformity
    defect_pixels: DefectPixels
    quantum_efficiency: Estimate | None = None
    photons_per_pixel_per_uw: float | None = Field(
        None, gt=0.0, description="photons per pixel per uW at the first exposure (known illumination)"
    )
    laser_power_uw: float | None = Field(None, gt=0.0)
    anchor_power_uw: float | None = Field(None, gt=0.0)
    dark_current: list[DarkCurrentPoint] = Field(default_factory=list)
    temperature_law: TemperatureLaw | None = None
    operating_points: list[OperatingPointCalibration] = Field(min_length=1)
    photon_transfer_curve: list[PhotonTransferPoint] | None = Field(
        None,
        description="the sweep's levels (opu_hal.calibration.photon_transfer.estimate); drawn, not used to account",
    )
    notes: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> Calibration:
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
        if problem is None:
            problem = implausible(self)
        if problem is not None:
            raise ValueError(problem)
        return self

    def point(self, temperature_c: float, exposure_us: float) -> OperatingPointCalibration | None:
        for op in self.operating_points:
            if op.temperature_c == temperature_c and op.exposure_us == exposure_us:
                return op
        return None


from .plausibility import implausible  # noqa: E402 (reads Calibration's fields; imported once it exists)


def _coverage(key: str, expected: list, found: list) -> str | None:
    """Why ``found`` (the points of ``key``) is not ``expected`` with each point once, or None."""
    if sorted(found) == sorted(expected):
        return None
    missing = sorted(set(expected) - set(found))
    extra = sorted({point for point in found if point not in expected or found.count(point) > 1})
    return (
        f"key '{key}' must hold one point per calibrated {'(temperature_c, exposure_us)' if key == 'operating_points' else 'temperature_c'}"
        f" ({len(expected)} points), got {len(found)}"
        + (f"; missing {missing}" if missing else "")
        + (f"; not calibrated or repeated {extra}" if extra else "")
    )


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
            raise CalibrationError(
                f"{file}: {size} bytes is over the {MAX_FILE_BYTES}-byte limit of a calibration file"
            )
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
        older = OLDER_VERSIONS.get(version) if isinstance(version, int) else None
        why = f" (written {older})" if older else ""
        raise CalibrationError(
            f"{file}: key 'schema_version' is {version!r}{why}; this opu-hal reads version {SCHEMA_VERSION} "
            "only: re-run `opu-hal calibrate`"
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
