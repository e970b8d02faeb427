"""Noise-adding releases of a clipped query, as trainers use them (the accounting is in
:mod:`opu_hal.privacy`; this module only applies noise).

- :class:`GaussianRelease`: ``u + N(0, noise_std^2)`` with normals from the secure generator
  (software noise; continuous, so no lattice to exploit).
- :class:`SkellamRelease`: the lattice Skellam mechanism of :mod:`opu_hal.privacy.skellam` with
  integer noise drawn from a device (:meth:`opu_hal.Device.draw_privacy_counts`): scale by
  ``gamma``, round randomly (secure uniforms), add the counts, scale back.
- :class:`DigitizedRelease`: the same lattice (per-coordinate) with the counts replaced by sums of
  digitized camera reads at any gain (:meth:`opu_hal.Device.draw_digitized_counts`), accounted by
  :mod:`opu_hal.privacy.digitized_lattice`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ..contract.device import Device
from ..contract.errors import DeviceUnavailable
from ..contract.noise import NoiseDistribution, PrivacyCounts
from ..randomness.secure_random import SecureGenerator
from .digitized_lattice import DigitizedLattice
from .skellam import SkellamLattice


class GaussianRelease:
    """Adds i.i.d. Gaussian noise of std ``noise_std`` (software, secure generator)."""

    mechanism = "gaussian"

    def __init__(self, noise_std: float, generator: SecureGenerator | None = None) -> None:
        self.noise_std = float(noise_std)
        self.generator = generator or SecureGenerator()

    @property
    def distribution(self) -> NoiseDistribution:
        """Gaussian, from the secure generator (named for the stream it used: CPU or GPU)."""
        return NoiseDistribution(kind="gaussian", generator=self.generator.name)

    def release(self, u: torch.Tensor) -> torch.Tensor:
        noise = self.generator.standard_normal(u.numel(), u.device).to(dtype=u.dtype)
        return torch.add(u, noise.view_as(u), alpha=self.noise_std)  # one pass, no scaled copy


def randomized_round(x: np.ndarray, generator: SecureGenerator) -> np.ndarray:
    """Unbiased randomized rounding: ``floor(x) + 1[U < frac(x)]`` per coordinate."""
    low = np.floor(x)
    rounded: np.ndarray = low + (generator.uniform(x.size).reshape(x.shape) < (x - low))
    return rounded


def on_lattice(
    u: torch.Tensor, gamma: float, generator: SecureGenerator, counts_for: Callable[[int], PrivacyCounts]
) -> tuple[np.ndarray, PrivacyCounts]:
    """``R(gamma u) + K`` flat in float64 (integers, exact), ``K = counts_for(n)`` the device's
    counts for the ``n`` coordinates (drawn and checked by the caller's ``counts_for``)."""
    x = u.detach().to("cpu", torch.float64).numpy().ravel() * gamma
    rounded = randomized_round(x, generator)
    draw = counts_for(x.size)
    return rounded + draw.counts.numpy().astype(np.float64), draw


def skellam_counts(device: Device[Any], n_values: int, poisson_mean: float, who: str = "device") -> PrivacyCounts:
    """``device``'s Skellam counts, refused when their Poisson mean is below ``poisson_mean``."""
    draw = device.draw_privacy_counts(n_values, poisson_mean)
    lower = draw.distribution.poisson_mean_lower  # None (not stated) and NaN are refused too
    if lower is None or not lower >= poisson_mean * (1 - 1e-12):
        raise DeviceUnavailable(f"{who} delivered Poisson mean {lower} < requested {poisson_mean}")
    return draw


def as_release(noised: np.ndarray, gamma: float, like: torch.Tensor) -> torch.Tensor:
    """The lattice values ``noised`` scaled back by ``1 / gamma``, in ``like``'s device, dtype and shape."""
    return torch.from_numpy(noised / gamma).to(device=like.device, dtype=like.dtype).view_as(like)


class SkellamRelease:
    """``(R(gamma u) + K) / gamma`` with ``K`` Skellam counts from ``device`` of Poisson mean >= ``poisson_mean``."""

    mechanism = "skellam"

    def __init__(
        self,
        device: Device[Any],
        lattice: SkellamLattice,
        poisson_mean: float,
        generator: SecureGenerator | None = None,
    ) -> None:
        if not device.capabilities.privacy_noise:
            # Ask the device why: its draw_privacy_counts names the profile key to change.
            device.draw_privacy_counts(1, poisson_mean)
            raise DeviceUnavailable(f"profile {device.profile.label!r} cannot serve as a privacy-noise source")
        self.device = device
        self.lattice = lattice
        self.poisson_mean = float(poisson_mean)
        self.generator = generator or SecureGenerator()
        self.distribution: NoiseDistribution | None = None

    @property
    def noise_std(self) -> float:
        """Std of the applied noise in query units (at the accounted Poisson mean)."""
        return self.lattice.noise_std(self.poisson_mean)

    def release(self, u: torch.Tensor) -> torch.Tensor:
        noised, draw = on_lattice(
            u, self.lattice.gamma, self.generator, lambda n: skellam_counts(self.device, n, self.poisson_mean)
        )
        self.distribution = draw.distribution
        return as_release(noised, self.lattice.gamma, u)


class DigitizedRelease:
    """``(R(gamma u) + K) / gamma`` with ``K`` the device's digitized counts of ``reads`` reads each: the
    lattice and rounding of :class:`SkellamRelease` (same secure uniforms), the noise of
    :class:`~opu_hal.privacy.digitized_lattice.DigitizedLattice`."""

    mechanism = "digitized"

    def __init__(
        self, device: Device[Any], lattice: DigitizedLattice, reads: int, generator: SecureGenerator | None = None
    ) -> None:
        if not device.capabilities.digitized_noise:
            device.digitized_read_law()  # names why
            raise DeviceUnavailable(f"profile {device.profile.label!r} gives no digitized privacy noise")
        if device.digitized_read_law() != lattice.law:
            raise DeviceUnavailable(
                f"profile {device.profile.label!r}: the camera's read law changed since the "
                "noise was planned (temperature or calibration); plan again"
            )
        self.device, self.lattice, self.reads = device, lattice, int(reads)
        self.generator = generator or SecureGenerator()
        self.distribution: NoiseDistribution | None = None

    @property
    def noise_std(self) -> float:
        """Std of the applied noise in query units (at the box's least-variance camera)."""
        return self.lattice.noise_std(self.reads)

    def release(self, u: torch.Tensor) -> torch.Tensor:
        gamma = self.lattice.lattice.gamma
        noised, draw = on_lattice(u, gamma, self.generator, self._counts)
        self.distribution = draw.distribution
        return as_release(noised, gamma, u)

    def _counts(self, n_values: int) -> PrivacyCounts:
        if self.device.digitized_read_law() != self.lattice.law:  # e.g. another speckle selection since the plan
            raise DeviceUnavailable(
                f"profile {self.device.profile.label!r}: the camera's read law changed since the noise was planned; "
                "plan again"
            )
        draw = self.device.draw_digitized_counts(n_values, self.reads)
        if draw.distribution.reads_per_value != self.reads or draw.counts.numel() != n_values:
            raise DeviceUnavailable(
                f"device delivered {draw.distribution.reads_per_value} reads per count for "
                f"{draw.counts.numel()} values; planned {self.reads} for {n_values}"
            )
        return draw
