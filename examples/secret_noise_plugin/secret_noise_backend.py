"""A minimal opu-hal backend plugin whose noise is secret (the plugin guide's example, docs/plugins.md).

``values = x B + g``: ``B`` a Gaussian matrix seeded by the profile (public, reproducible), ``g``
Gaussian noise of std ``noise_std`` drawn from :class:`opu_hal.randomness.secure_random.SecureGenerator`
(never from a seed). Install it with an entry point (pyproject.toml of the plugin's package)::

    [project.entry-points."opu_hal.backends"]
    secret-noise = "secret_noise_backend:SPEC"
    [project.entry-points."opu_hal.profiles"]
    secret-noise = "secret_noise_backend:PROFILES"

then ``opu-hal check secret-noise-cpu`` runs the conformance suite on it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

import torch
from pydantic import Field

from opu_hal import BackendSpec, BaseProfile, Capabilities, Device, NoiseReport, Projection
from opu_hal.randomness.secure_random import SecureGenerator

#: The folder of named profiles this plugin ships (entry-point group ``opu_hal.profiles``).
PROFILES = Path(__file__).resolve().parent / "profiles"


class SecretNoiseProfile(BaseProfile):
    """``backend = "secret-noise"``: the profile keys this backend reads, validated by pydantic."""

    backend: Literal["secret-noise"]
    in_features: int = Field(ge=1, le=2**16, description="input width of the projection")
    out_features: int = Field(ge=1, le=2**16, description="output width of the projection")
    noise_std: float = Field(0.1, ge=0.0, le=1e3, description="std of the secret Gaussian noise, output units")


class SecretNoiseDevice(Device[SecretNoiseProfile]):
    def __init__(self, profile: SecretNoiseProfile) -> None:
        super().__init__(profile)
        generator = torch.Generator().manual_seed(profile.seed)  # the matrix is public: seeded
        self._matrix = torch.randn(profile.in_features, profile.out_features, generator=generator)
        self._matrix /= math.sqrt(profile.in_features)
        self._noise_std = profile.noise_std
        self._secret = SecureGenerator()  # the noise is not: 256-bit key from os.urandom

    def _describe(self) -> Capabilities:
        return Capabilities(
            input_kind="real",
            output_kind="linear",
            max_in_features=None,
            max_out_features=None,
            settable={"noise_std": (0.0, 1e3, "output units")},
        )

    def _apply_options(self, options: dict[str, float]) -> None:
        self._noise_std = options.get("noise_std", self._noise_std)

    def noise_report(self) -> NoiseReport:
        return NoiseReport(std=self._noise_std, std_lower=self._noise_std, source="software")

    def _project(self, x: torch.Tensor) -> Projection:
        values = x.float() @ self._matrix
        noise = self._secret.standard_normal(values.numel()).reshape(values.shape).to(values.dtype)
        return Projection(values=values + self._noise_std * noise, noise=self.noise_report())


SPEC = BackendSpec("secret-noise", SecretNoiseProfile, SecretNoiseDevice)
