"""What a device returns: the projected values and the noise actually in them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import torch

from .errors import ParameterError

NoiseSource = Literal["declared", "calibrated", "software"]
NOISE_SOURCES: tuple[str, ...] = ("declared", "calibrated", "software")


@dataclass(frozen=True)
class NoiseReport:
    """Per-coordinate std of the additive Gaussian noise in a projection's values.

    ``std`` is the best estimate, ``std_lower`` the figure privacy accounting may use (a lower
    confidence bound, or the exact value when the noise is added in software); ``source`` says
    where the figure came from. ``temperature_c`` and ``exposure_us`` are the operating point,
    ``None`` where the device has none. ``passes`` counts the device reads combined into the
    values (2 for a ternary input projected as ``B e+ - B e-``).
    """

    std: float
    std_lower: float
    source: NoiseSource
    temperature_c: float | None = None
    exposure_us: float | None = None
    passes: int = 1
    details: dict[str, float] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.source not in NOISE_SOURCES:
            raise ParameterError(f"noise source must be one of {NOISE_SOURCES}, got {self.source!r}")
        for name in ("std", "std_lower"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ParameterError(f"NoiseReport.{name} must be finite and >= 0, got {value}")
        if self.std_lower > self.std:
            raise ParameterError(
                f"NoiseReport.std_lower ({self.std_lower}) must not exceed std ({self.std}): "
                "accounting may never use more noise than is applied"
            )
        if self.passes < 1:
            raise ParameterError(f"NoiseReport.passes must be >= 1, got {self.passes}")

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready copy, for result records and the CLI."""
        return {
            "std": self.std,
            "std_lower": self.std_lower,
            "source": self.source,
            "temperature_c": self.temperature_c,
            "exposure_us": self.exposure_us,
            "passes": self.passes,
            **({"details": dict(self.details)} if self.details else {}),
        }


@dataclass(frozen=True)
class Projection:
    """A batch of projected values ``(n, out_features)`` and the noise they carry."""

    values: torch.Tensor
    noise: NoiseReport
