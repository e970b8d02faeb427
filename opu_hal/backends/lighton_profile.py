"""The ``lighton`` backend's profile model and its :class:`~opu_hal.profiles.registry.BackendSpec`.

Importing this module does not import the SDK: ``lightonml`` is imported when a device is built.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, model_validator

from ..contract.backend_spec import BackendSpec
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
    exposure_us: Optional[float] = Field(None, ge=1.0, le=1e7, description="camera exposure, us")
    frametime_us: Optional[float] = Field(None, ge=1.0, le=1e7, description="DMD frame time, us")
    retries: int = Field(3, ge=0, le=20, description="retries of a failed or timed-out transform")
    timeout_s: float = Field(60.0, ge=0.01, le=3600.0, description="time allowed per transform, s")
    backoff_s: float = Field(0.2, ge=0.0, le=60.0, description="first retry delay, doubled each time, s")

    @model_validator(mode="after")
    def _bounded_total_backoff(self) -> "LightonProfile":
        total = self.backoff_s * (2**self.retries - 1)
        if total > MAX_TOTAL_BACKOFF_S:
            raise ValueError(
                f"retries = {self.retries} with backoff_s = {self.backoff_s} waits {total:.4g} s in total between "
                f"retries; keep backoff_s * (2^retries - 1) <= {MAX_TOTAL_BACKOFF_S:g} s")
        return self

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


SPEC = BackendSpec("lighton", LightonProfile, "opu_hal.backends.lighton:LightonDevice")
