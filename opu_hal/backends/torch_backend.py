"""``backend = "torch"``: the GPU/CPU fallback with software noise of an exactly known std."""

from __future__ import annotations

import math

import torch

from ..contract.capabilities import Capabilities
from ..contract.device import Device
from ..contract.errors import InputError, ProfileError
from ..contract.noise import NoiseDistribution, NoiseReport, PrivacyCounts, Projection
from ..randomness.secure_random import SecureGenerator
from ..randomness.seeding import stream_seed
from ..runtime.compute import resolve_torch_device
from ..runtime.memory import available_bytes, check_rows_fit, gib
from .torch_profile import TorchProfile

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def gaussian_matrix(in_features: int, out_features: int, std: float, seed: int) -> torch.Tensor:
    """The ``(in, out)`` matrix with i.i.d. N(0, std^2) entries, drawn on the CPU from ``seed``.

    Drawn on the CPU so that the same seed gives the same matrix on every device kind.
    """
    generator = torch.Generator(device="cpu").manual_seed(seed)
    matrix = torch.randn(in_features, out_features, generator=generator, dtype=torch.float64)
    return matrix.mul_(std)


PEAK_FACTOR = 3  # float32 copies of a row's input and output at the projection's peak


class TorchDevice(Device[TorchProfile]):
    """``values = x B + g`` with ``g ~ N(0, noise_std^2)`` added in software (exact report)."""

    def __init__(self, profile: TorchProfile) -> None:
        super().__init__(profile)
        self._device = resolve_torch_device(profile.device)
        self._dtype = _DTYPES[profile.dtype]
        if profile.calibration is not None:
            raise ProfileError(
                f"profile {profile.label!r}: key 'calibration' ({profile.calibration}) applies to a camera; a torch "
                "profile has none (its noise is software noise of exactly noise_std): drop the calibration"
            )
        # the matrix is drawn in float64, then cast: both copies exist at the peak
        need = profile.in_features * profile.out_features * (8 + (8 if profile.dtype == "float64" else 4))
        if need > available_bytes() // 2:
            raise ProfileError(
                f"profile {profile.label!r}: keys 'in_features' x 'out_features' = {profile.in_features} x "
                f"{profile.out_features} need a {gib(need)} matrix; this host has {gib(available_bytes())} available "
                "(half of it may be used): use smaller sizes"
            )
        std = profile.matrix_std if profile.matrix_std is not None else 1.0 / math.sqrt(profile.in_features)
        self._matrix = gaussian_matrix(
            profile.in_features, profile.out_features, std, stream_seed(profile.seed, "matrix")
        ).to(device=self._device, dtype=self._dtype)
        self._noise_std = profile.noise_std
        self._noise_generator = torch.Generator(device=self._device)
        self._noise_generator.manual_seed(stream_seed(profile.seed, "noise"))
        self._privacy_generator: SecureGenerator | None = None

    def _check_memory(self, rows: int) -> None:
        check_rows_fit(rows, self.in_features, self.out_features, PEAK_FACTOR, self._profile.label)

    def _describe(self) -> Capabilities:
        return Capabilities(
            input_kind=self._profile.input_kind,
            output_kind="linear",
            max_in_features=None,
            max_out_features=None,
            settable={"noise_std": (0.0, math.inf, "output units")},
            compute_device=self._device.type,
            privacy_noise=True,
        )

    def draw_privacy_counts(self, n_values: int, poisson_mean: float) -> PrivacyCounts:
        """Exact software Skellam noise (two Poisson counts of mean ``poisson_mean``), from the secure
        generator: the torch fallback's privacy-noise source."""
        if not (math.isfinite(poisson_mean) and poisson_mean > 0):
            raise InputError(f"requested Poisson mean must be finite and > 0, got {poisson_mean}")
        if self._privacy_generator is None:
            self._privacy_generator = SecureGenerator()
        counts = self._privacy_generator.skellam(poisson_mean, n_values)
        return PrivacyCounts(
            counts=torch.from_numpy(counts),
            distribution=NoiseDistribution(
                kind="poisson-counts",
                generator=self._privacy_generator.name,
                poisson_mean=poisson_mean,
                poisson_mean_lower=poisson_mean,
                reads_per_value=None,
                lattice_step=1.0,
                clip_probability=0.0,
            ),
        )

    @property
    def matrix(self) -> torch.Tensor:
        """The ``(in_features, out_features)`` projection matrix (read-only view)."""
        return self._matrix

    def _apply_options(self, options: dict[str, float]) -> None:
        self._noise_std = options.get("noise_std", self._noise_std)

    def set_noise_std(self, std: float) -> None:
        """Deprecated: ``set_options(noise_std=std)``."""
        self._deprecated_setter("set_noise_std", noise_std=std)

    def noise_report(self) -> NoiseReport:
        return NoiseReport(std=self._noise_std, std_lower=self._noise_std, source="software")

    def _project(self, x: torch.Tensor) -> Projection:
        values = x.to(device=self._device, dtype=self._dtype) @ self._matrix
        if self._noise_std > 0:
            noise = torch.randn(values.shape, generator=self._noise_generator, device=self._device, dtype=self._dtype)
            values.add_(noise, alpha=self._noise_std)
        return Projection(values=values, noise=self.noise_report())
