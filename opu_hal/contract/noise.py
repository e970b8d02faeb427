"""What a device returns: the projected values and the noise actually in them."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # annotations only: `opu-hal plan` reads this module without importing torch
    import torch

from .errors import ParameterError

NoiseSource = Literal["declared", "calibrated", "software"]
NOISE_SOURCES: tuple[str, ...] = ("declared", "calibrated", "software")


@dataclass(frozen=True)
class NoiseDistribution:
    """What the noise in a release IS, beyond its std: what a discrete privacy mechanism needs.

    ``kind``: ``"gaussian"`` (software noise, continuous), ``"poisson-counts"`` (differences of
    photo-electron counts: Skellam) or ``"digitized-reads"`` (differences of sums of digitized camera
    reads in DN, :class:`DigitizedReadLaw`; ``poisson_mean`` is then one read's photo-electrons). For counts: ``poisson_mean`` is the mean of each count (the
    model's or calibration's estimate) and ``poisson_mean_lower`` the figure accounting may use
    (never above the applied mean); ``reads_per_value`` pixel reads summed into each count;
    ``read_noise_e`` and ``gain_e_per_dn`` of the camera; ``lattice_step`` the output units of one
    count; ``clip_probability`` the probability that one read saturates (the analysis assumes it
    never does); ``generator`` names the random source; ``mean_source`` says where the figure
    the reads were planned with came from (the profile's model, or a calibration's lower bound);
    ``frames`` the anchor-only camera frames the draw took (every pixel of a frame is one read) and
    ``camera_seconds`` their duration at the camera's frame period.
    """

    kind: Literal["gaussian", "poisson-counts", "digitized-reads"]
    generator: str
    poisson_mean: float | None = None
    poisson_mean_lower: float | None = None
    reads_per_value: int | None = None
    read_noise_e: float | None = None
    gain_e_per_dn: float | None = None
    lattice_step: float | None = None
    clip_probability: float | None = None
    mean_source: str | None = None
    frames: int | None = None
    camera_seconds: float | None = None
    kept_pixels: int | None = None  # speckle anchor: the pixels the counts read (per-pixel bounds)
    anchor_checks: int | None = None  # drift watch: anchor re-reads so far, all passed
    anchor_check_every: int | None = None  # drift watch: draws between two re-reads
    mean_bins: int | None = None  # digitized speckle: the bins of kept pixels' means accounted (a grid check each)

    def __post_init__(self) -> None:
        if (
            self.poisson_mean_lower is not None
            and self.poisson_mean is not None
            and not 0 < self.poisson_mean_lower <= self.poisson_mean
        ):
            raise ValueError(
                f"poisson_mean_lower ({self.poisson_mean_lower}) must be in (0, poisson_mean = "
                f"{self.poisson_mean}]: accounting may never use more noise than is applied"
            )

    def to_dict(self) -> dict[str, object]:
        return {k: v for k, v in asdict(self).items() if v is not None}


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
    distribution: NoiseDistribution | None = None

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
            **({"distribution": self.distribution.to_dict()} if self.distribution else {}),
        }


@dataclass(frozen=True)
class DigitizedReadLaw:
    """What one anchor-only read of a digitized camera is, for exact accounting
    (:mod:`opu_hal.privacy.digitized`, eq. 1): Poisson photo-electrons of mean in ``mean_e = (low,
    high)``, read noise of rms in ``read_noise_e = (low, high)`` (equal ends: the declared model; a
        calibration's intervals otherwise), then full well, gain, rounding, black level and the ADC's clip;
    ``gain_e_per_dn``, ``black_level_dn`` and ``full_well_e`` are low ends whose ``*_high`` close the
    calibrated box (None: the declared point).
    ``source`` says where the intervals came from; ``pixels_per_frame`` and ``frame_time_s`` price the
    reads (one read per pixel of an anchor-only frame). A speckle anchor's law (``kept_pixels`` set) has one
    mean interval per bin of kept pixels, ``mean_bins`` (``mean_e`` their hull): each value reads ONE kept
    pixel ``2 reads`` times, in ``2 reads`` frames per pass over the kept pixels
    (:mod:`opu_hal.privacy.digitized_bins`)."""

    mean_e: tuple[float, float]
    read_noise_e: tuple[float, float]
    gain_e_per_dn: float
    adc_bits: int
    black_level_dn: float
    full_well_e: float
    source: str
    pixels_per_frame: int = 1
    frame_time_s: float = 0.0
    gain_e_per_dn_high: float | None = None
    black_level_dn_high: float | None = None
    full_well_e_high: float | None = None
    mean_bins: tuple[tuple[float, float], ...] = ()
    kept_pixels: int | None = None
    map_pixels: int | None = None  # speckle: the pixels of the anchor map the kept ones were chosen from

    def __post_init__(self) -> None:
        for low, high in self.mean_bins:
            if not (math.isfinite(low) and math.isfinite(high) and self.mean_e[0] <= low <= high <= self.mean_e[1]):
                raise ParameterError(
                    f"DigitizedReadLaw.mean_bins must be intervals inside mean_e {self.mean_e}, got {(low, high)}"
                )
        if (self.kept_pixels is None) != (not self.mean_bins) or (
            self.kept_pixels is not None and self.kept_pixels < 1
        ):
            raise ParameterError(
                "DigitizedReadLaw.kept_pixels (>= 1) and mean_bins go together (a speckle anchor's kept pixels), "
                f"got {self.kept_pixels!r} with {len(self.mean_bins)} bin(s)"
            )
        for name in ("mean_e", "read_noise_e"):
            low, high = getattr(self, name)
            if not (math.isfinite(low) and math.isfinite(high) and 0 < low <= high):
                raise ParameterError(f"DigitizedReadLaw.{name} must be an interval 0 < low <= high, got {(low, high)}")
        for name in ("gain_e_per_dn", "black_level_dn", "full_well_e"):
            low, high = getattr(self, name), getattr(self, f"{name}_high")
            if high is not None and not (math.isfinite(high) and high >= low):
                raise ParameterError(f"DigitizedReadLaw.{name}_high must be finite and >= {name} ({low}), got {high}")

    def high(self, name: str) -> float:
        """The high end of ``gain_e_per_dn``, ``black_level_dn`` or ``full_well_e`` (the value itself when
        the law declares a point: the profile's camera)."""
        value = getattr(self, f"{name}_high")
        return float(getattr(self, name) if value is None else value)

    def frames(self, n_values: int, reads: int) -> int:
        """Anchor-only frames of ``n_values`` noise values at ``reads`` reads per count: ``2 reads
        ceil(n / kept)`` for a speckle anchor (each value's counts read one pixel in ``2 reads`` frames),
        ``ceil(2 reads n / pixels_per_frame)`` for a flat one (any pixel serves any count)."""
        if self.kept_pixels is not None:
            return 2 * reads * -(-n_values // self.kept_pixels)
        return -(-2 * reads * n_values // self.pixels_per_frame)


@dataclass(frozen=True)
class PrivacyCounts:
    """Integer privacy noise drawn from a device: ``counts`` (int64, one value per requested
    coordinate) is the difference of two independent sums of Poisson counts, each of mean at least
    ``distribution.poisson_mean_lower``; ``report`` says how it was made."""

    counts: torch.Tensor
    distribution: NoiseDistribution


@dataclass(frozen=True)
class Projection:
    """A batch of projected values ``(n, out_features)`` and the noise they carry."""

    values: torch.Tensor
    noise: NoiseReport
