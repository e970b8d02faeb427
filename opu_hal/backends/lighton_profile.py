"""The ``lighton`` backend's profile model and its :class:`~opu_hal.profiles.registry.BackendSpec`.

Importing this module does not import the SDK: ``lightonml`` is imported when a device is built.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ..contract.backend_spec import BackendSpec
from ..contract.errors import ProfileError
from ..contract.profile_base import CAMERA_PIXELS, DMD_MIRRORS, BaseProfile

MAX_TOTAL_BACKOFF_S = 600.0


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
    noise_std: float = Field(0.0, ge=0.0, le=1e6, description="software noise std (simulated only), output units")
    rescale: Literal["none", "variance", "norm"] = Field(
        "none", description="lightonml output rescaling of linear_transform"
    )
    exposure_us: float | None = Field(None, ge=1.0, le=1e7, description="camera exposure, us")
    frametime_us: float | None = Field(None, ge=1.0, le=1e7, description="DMD frame time, us")
    # Calibration (issue 36). lightonml 1.4.3 reads no temperature, so the camera's operating
    # temperature is declared here; a calibration must cover it. The powers at the sensor are not
    # known to the SDK either: the profile declares them (LightOn's figures, or a power meter's).
    temperature_c: float | None = Field(
        None, ge=-60.0, le=150.0, description="declared camera temperature, Celsius (lightonml cannot read it)"
    )
    laser_power_uw: float | None = Field(
        None, ge=1e-6, le=1e6, description="signal power reaching the sensor with every mirror on, uW"
    )
    anchor_power_uw: float | None = Field(
        None,
        ge=1e-6,
        le=1e6,
        description="reference-beam power at the sensor, uW; only for an OPU with a reference beam",
    )
    wavelength_nm: float = Field(532.0, ge=200.0, le=2000.0, description="laser wavelength, nm")
    sensor_pixels: int = Field(
        CAMERA_PIXELS, ge=1, le=2**26, description="pixels the light spreads over (power is shared)"
    )
    retries: int = Field(3, ge=0, le=20, description="retries of a failed or timed-out transform")
    timeout_s: float = Field(60.0, ge=0.01, le=3600.0, description="time allowed per transform, s")
    backoff_s: float = Field(0.2, ge=0.0, le=60.0, description="first retry delay, doubled each time, s")

    @model_validator(mode="after")
    def _bounded_total_backoff(self) -> LightonProfile:
        total = self.backoff_s * (2**self.retries - 1)
        if total > MAX_TOTAL_BACKOFF_S:
            raise ValueError(
                f"retries = {self.retries} with backoff_s = {self.backoff_s} waits {total:.4g} s in total between "
                f"retries; keep backoff_s * (2^retries - 1) <= {MAX_TOTAL_BACKOFF_S:g} s"
            )
        return self

    @model_validator(mode="after")
    def _software_noise_only_when_simulated(self) -> LightonProfile:
        if self.noise_std > 0 and not self.simulated:
            raise ValueError(
                "noise_std is software noise for simulated = true; on hardware the noise comes "
                "from the device and its calibration file"
            )
        return self

    @property
    def temperature_min_c(self) -> float | None:
        """The temperature range calibration may cover: the declared point (not settable)."""
        return self.temperature_c

    @property
    def temperature_max_c(self) -> float | None:
        return self.temperature_c

    @property
    def requires_hardware(self) -> bool:
        return not self.simulated

    def declared(self, key: Literal["temperature_c", "exposure_us", "anchor_power_uw"]) -> float:
        """The value of an optional key that a calibrated or raw-frame read needs; a
        :class:`ProfileError` naming the key when the profile leaves it unset."""
        value: float | None = getattr(self, key)
        if value is None:
            raise ProfileError(
                f"profile {self.label!r}: the key {key!r} is unset; calibrated and raw-frame "
                "reads need it (see the lighton profile's field descriptions)"
            )
        return float(value)


SPEC = BackendSpec("lighton", LightonProfile, "opu_hal.backends.lighton:LightonDevice")
