"""The keys every device profile has, whatever its backend; each backend's model extends it.

Backends own their profile models (``opu_hal/backends/*``); this module holds only what they share,
so the device contract (:mod:`opu_hal.contract.device`) and the profile reader (:mod:`opu_hal.profiles.catalogue`)
both depend on it without depending on each other.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

# LightOn OPU geometry, shared by the backends that model or drive one (simulated, lighton).
DMD_MIRRORS = 912 * 1140
CAMERA_PIXELS = 2040 * 1088
DEFAULT_CHECK_EVERY = 25  # privacy draws between two re-reads of a speckle anchor (anchor_check_every)


class BaseProfile(BaseModel):
    """Keys every profile has, whatever its backend."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)

    backend: str
    name: str = Field("", description="display name; defaults to the file name without .toml")
    description: str = Field("", description="one line for `opu-hal devices`")
    in_features: int = Field(ge=1, description="input width of the projection")
    out_features: int = Field(ge=1, description="output width of the projection")
    seed: int = Field(0, ge=0, le=2**63 - 1, description="seed of the projection matrix and noise")
    calibration: str | None = Field(
        None, description="calibration JSON written by `opu-hal calibrate`, relative to the profile"
    )

    _source: Path | None = PrivateAttr(default=None)

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
