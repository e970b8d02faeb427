"""Device profiles: TOML files validated by one pydantic model per backend.

The ``backend`` key is the discriminator: it selects the model (through the backend registry, so
third-party backends extend the union). Every failure raises :class:`ProfileError` naming the
file, the key path and what is allowed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Literal, Optional

import annotated_types
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from .errors import ProfileError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

PROFILE_DIR_ENV = "OPU_HAL_PROFILE_DIR"
_PACKAGED_PROFILE_DIR = Path(__file__).resolve().parent.parent / "device_profiles"


class BaseProfile(BaseModel):
    """Keys every profile has, whatever its backend."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)

    backend: str
    name: str = Field("", description="display name; defaults to the file name without .toml")
    description: str = Field("", description="one line for `opu-hal devices`")
    in_features: int = Field(ge=1, description="input width of the projection")
    out_features: int = Field(ge=1, description="output width of the projection")
    seed: int = Field(0, ge=0, le=2**63 - 1, description="seed of the projection matrix and noise")
    calibration: Optional[str] = Field(
        None, description="calibration JSON written by `opu-hal calibrate`, relative to the profile"
    )

    _source: Optional[Path] = PrivateAttr(default=None)

    @property
    def source(self) -> Path | None:
        """The file this profile was read from, if any."""
        return self._source

    @property
    def requires_hardware(self) -> bool:
        """Whether devices of this profile need physical hardware (skipped in CI without it)."""
        return False

    @property
    def label(self) -> str:
        """Name for messages and result records."""
        if self.name:
            return self.name
        return self._source.stem if self._source else self.backend


class TorchProfile(BaseProfile):
    """``backend = "torch"``: a seeded Gaussian matrix, software noise of exactly ``noise_std``."""

    backend: Literal["torch"]
    device: Literal["auto", "cuda", "cpu"] = Field(
        "auto", description="'auto' takes CUDA when present, CPU otherwise"
    )
    noise_std: float = Field(0.0, ge=0.0, description="std of the added Gaussian noise, output units")
    matrix_std: Optional[float] = Field(
        None, gt=0.0, description="std of the matrix entries; default 1/sqrt(in_features)"
    )
    input_kind: Literal["real", "ternary", "binary"] = Field(
        "real", description="which inputs the device accepts"
    )
    dtype: Literal["float32", "float64"] = Field("float32", description="compute precision")


DMD_MIRRORS = 912 * 1140
CAMERA_PIXELS = 2040 * 1088


class SimulatedProfile(BaseProfile):
    """``backend = "simulated"``: the physics model of an OPU (optics, camera, temperature).

    Defaults describe a LightOn-like device: 912x1140 DMD, 8-bit camera of 2040x1088 pixels with
    5.5 um pitch, 400 us exposure, 532 nm laser. Units are in the key names.
    """

    backend: Literal["simulated"]
    in_features: int = Field(ge=1, le=DMD_MIRRORS, description="DMD micromirrors used")
    out_features: int = Field(ge=1, le=CAMERA_PIXELS, description="camera pixels read")
    mode: Literal["linear", "intensity"] = Field(
        "linear", description="'linear': B x from three intensity frames; 'intensity': |B x|^2"
    )
    temperature_c: float = Field(25.0, description="sensor temperature at start, Celsius")
    temperature_min_c: float = Field(-10.0, ge=-60.0, le=150.0, description="lowest settable, Celsius")
    temperature_max_c: float = Field(85.0, ge=-60.0, le=150.0, description="highest settable, Celsius")
    exposure_us: float = Field(400.0, gt=0.0, le=1e7, description="exposure time per frame, us")
    laser_power_uw: float = Field(
        0.7, gt=0.0, le=1e6, description="signal power reaching the sensor with every mirror on, uW"
    )
    anchor_power_uw: float = Field(
        0.7, gt=0.0, le=1e6, description="reference (anchor) power reaching the sensor, uW"
    )
    wavelength_nm: float = Field(532.0, ge=200.0, le=2000.0, description="laser wavelength, nm")
    quantum_efficiency: float = Field(0.6, gt=0.0, le=1.0, description="electrons per photon")
    sensor_pixels: int = Field(
        CAMERA_PIXELS, ge=1, description="pixels the speckle spreads over (power is shared)"
    )
    pixel_pitch_um: float = Field(5.5, gt=0.0, le=100.0, description="pixel pitch, um")
    # 0.043 nA/cm^2 = 125 e-/s at 25 C for a 7.4 um pixel, the dark current CMOSIS gives for its
    # 8T global-shutter pixel (CMV300 datasheet v2.10, http://dtsheet.com/model/4255221, the family
    # of the 5.5 um CMV2000 of LightOn-like cameras): 69 e-/s at 5.5 um. The Konnik-Welsh law then
    # doubles every 7.1 K at 0 C, 8.4 K at 25 C, 11.5 K at 80 C; "doubles every 5-8 C" is the
    # usual CMOS figure (A. Theuwissen, harvestimaging.com/blog/?m=200909).
    dark_fom_na_per_cm2: float = Field(
        0.043, ge=0.0, le=1e4, description="dark-current figure of merit at 300 K, nA/cm^2"
    )
    dsnu_rms: float = Field(
        0.0, ge=0.0, le=3.0, description="log-std of the per-pixel dark-current multiplier (DSNU)"
    )
    hot_pixel_fraction: float = Field(0.0, ge=0.0, le=0.5, description="fraction of hot pixels")
    hot_pixel_factor: float = Field(
        20.0, ge=1.0, le=1e4, description="dark current of a hot pixel over a typical pixel"
    )
    read_noise_e: float = Field(6.0, ge=0.0, le=1e4, description="read noise std, electrons")
    gain_e_per_dn: float = Field(20.0, gt=0.0, le=1e6, description="conversion gain, electrons/DN")
    adc_bits: int = Field(8, ge=1, le=24, description="ADC bit depth")
    black_level_dn: int = Field(10, ge=0, description="ADC offset, DN")
    full_well_e: float = Field(10000.0, gt=0.0, description="pixel full-well capacity, electrons")
    block_mb: float = Field(64.0, gt=0.0, description="size of one generated matrix block, MiB")
    cache_mb: float = Field(512.0, ge=0.0, description="memory budget for cached blocks, MiB")

    @model_validator(mode="after")
    def _temperature_in_range(self) -> "SimulatedProfile":
        if not self.temperature_min_c <= self.temperature_c <= self.temperature_max_c:
            raise ValueError(
                f"temperature_c = {self.temperature_c} is outside "
                f"[temperature_min_c, temperature_max_c] = "
                f"[{self.temperature_min_c}, {self.temperature_max_c}]"
            )
        if self.black_level_dn >= 2**self.adc_bits - 1:
            raise ValueError(f"black_level_dn must be below 2^adc_bits - 1 = {2**self.adc_bits - 1}")
        return self


class LightonProfile(BaseProfile):
    """``backend = "lighton"``: LightOn's OPU through its SDK ``lightonml``.

    ``simulated = true`` runs the SDK's own simulated device (noiseless: ``noise_std`` is added
    in software). On hardware the noise report comes from ``calibration`` (a JSON file written by
    calibration); credentials, if any, come from the environment, never from a profile.
    """

    backend: Literal["lighton"]
    in_features: int = Field(ge=1, le=DMD_MIRRORS, description="DMD micromirrors used (fit1d)")
    out_features: int = Field(ge=1, le=CAMERA_PIXELS, description="n_components")
    simulated: bool = Field(False, description="run lightonml's simulated device, no hardware")
    mode: Literal["linear", "intensity"] = Field(
        "linear", description="'linear': linear_transform; 'intensity': transform (|Bx|^2)"
    )
    noise_std: float = Field(0.0, ge=0.0, description="software noise std (simulated only), output units")
    rescale: Literal["none", "variance", "norm"] = Field(
        "none", description="lightonml output rescaling of linear_transform"
    )
    exposure_us: Optional[float] = Field(None, gt=0.0, le=1e7, description="camera exposure, us")
    frametime_us: Optional[float] = Field(None, gt=0.0, le=1e7, description="DMD frame time, us")
    retries: int = Field(3, ge=0, le=20, description="retries of a failed or timed-out transform")
    timeout_s: float = Field(60.0, gt=0.0, le=3600.0, description="time allowed per transform, s")
    backoff_s: float = Field(0.2, ge=0.0, le=60.0, description="first retry delay, doubled each time, s")

    @model_validator(mode="after")
    def _software_noise_only_when_simulated(self) -> "LightonProfile":
        if self.noise_std > 0 and not self.simulated:
            raise ValueError(
                "noise_std is software noise for simulated = true; on hardware the noise comes "
                "from the device and its calibration file"
            )
        return self

    @property
    def requires_hardware(self) -> bool:
        return not self.simulated


def profile_search_dirs() -> list[Path]:
    """Where profile names (without a path) are looked up, in order."""
    dirs = []
    if os.environ.get(PROFILE_DIR_ENV):
        dirs.append(Path(os.environ[PROFILE_DIR_ENV]))
    dirs += [Path.cwd() / "device_profiles", _PACKAGED_PROFILE_DIR]
    unique: list[Path] = []
    for d in dirs:
        if d.resolve() not in [u.resolve() for u in unique]:
            unique.append(d)
    return unique


def resolve_profile_path(source: str | os.PathLike[str]) -> Path:
    """A profile file from a path, or from a bare name looked up in :func:`profile_search_dirs`."""
    path = Path(source)
    if path.is_file():
        return path
    if path.parent == Path(".") and path.suffix in ("", ".toml"):
        for directory in profile_search_dirs():
            candidate = directory / f"{path.stem}.toml"
            if candidate.is_file():
                return candidate
    known = sorted(p.stem for d in profile_search_dirs() if d.is_dir() for p in d.glob("*.toml"))
    raise ProfileError(
        f"{source}: no such profile file. Give a path to a .toml profile or one of the names "
        f"found in {', '.join(str(d) for d in profile_search_dirs())}: {', '.join(known) or 'none'}"
    )


def list_profiles(directory: str | os.PathLike[str] | None = None) -> list[Path]:
    """The profile files of a folder (default: the first search folder that exists)."""
    if directory is not None:
        return sorted(Path(directory).glob("*.toml"))
    for d in profile_search_dirs():
        if d.is_dir():
            return sorted(d.glob("*.toml"))
    return []


def load_profile(source: str | os.PathLike[str] | BaseProfile) -> BaseProfile:
    """Read and validate a profile; a validated profile object is returned as is."""
    if isinstance(source, BaseProfile):
        return source
    path = resolve_profile_path(source)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path}: malformed TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: cannot read the profile: {exc}") from None
    return validate_profile(data, path)


def validate_profile(data: dict[str, Any], path: Path | str = "<profile>") -> BaseProfile:
    """Validate a profile mapping with the model its ``backend`` key selects."""
    from .registry import backend_names, get_backend

    names = ", ".join(repr(n) for n in backend_names())
    backend = data.get("backend")
    if backend is None:
        raise ProfileError(f"{path}: key 'backend' is missing; allowed: {names}")
    if not isinstance(backend, str) or backend not in backend_names():
        raise ProfileError(f"{path}: key 'backend' is {backend!r}; allowed: {names}")
    model = get_backend(backend).profile_model
    try:
        profile = model.model_validate(data)
    except ValidationError as exc:
        raise ProfileError(format_validation_error(path, exc, model)) from None
    profile._source = Path(path) if not isinstance(path, Path) else path
    return profile


def format_validation_error(path: Path | str, exc: ValidationError, model: type[BaseModel]) -> str:
    """One line per problem: file, key path, what is wrong and what is allowed."""
    lines = [f"{path}: invalid {model.__name__} ({exc.error_count()} problem(s))"]
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(profile)"
        owner, field = _field_at(model, err["loc"])
        if err["type"] == "extra_forbidden":
            allowed = ", ".join(sorted(owner.model_fields)) if owner else "?"
            lines.append(f"  key '{key}': unknown key; allowed keys: {allowed}")
            continue
        allowed = _describe_field(field) if field is not None else ""
        got = "" if err["type"] == "missing" else f" (got {err.get('input')!r})"
        what = "required key is missing" if err["type"] == "missing" else err["msg"]
        lines.append(f"  key '{key}': {what}{got}" + (f"; allowed: {allowed}" if allowed else ""))
    return "\n".join(lines)


def _field_at(model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[type[BaseModel] | None, Any]:
    """The (model holding the key, its field or None) that a pydantic error location points to."""
    owner: type[BaseModel] | None = model
    for i, part in enumerate(loc):
        if owner is None or not isinstance(part, str) or part not in owner.model_fields:
            return owner, None
        field = owner.model_fields[part]
        if i == len(loc) - 1:
            return owner, field
        annotation = field.annotation
        owner = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    return owner, None


def _describe_field(field: Any) -> str:
    """Human description of a field's allowed values: type, bounds, choices, unit."""
    annotation = field.annotation
    args = getattr(annotation, "__args__", ())
    if getattr(annotation, "__origin__", None) is Literal:
        kind = "one of " + ", ".join(repr(a) for a in args)
    else:
        base = [a for a in args if a is not type(None)] or [annotation]
        kind = {int: "integer", float: "number", str: "string", bool: "true/false"}.get(
            base[0], getattr(base[0], "__name__", str(base[0]))
        )
        if type(None) in args:
            kind += " (optional)"
    bounds = []
    for meta in field.metadata:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            if isinstance(meta, getattr(annotated_types, attr.capitalize())):
                bounds.append(f"{sign} {getattr(meta, attr)}")
    text = kind + (" " + " and ".join(bounds) if bounds else "")
    if field.description:
        text += f" — {field.description}"
    return text
