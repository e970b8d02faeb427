"""How DP-DFA's averaged update is released and accounted (issues 12 and 36; the module docstring of
:mod:`trainers.methods.dp_dfa`): software Gaussian noise, or the device's Skellam counts or digitized
reads on a lattice, and the matching accounting event (fixed-size or Poisson sampling). The loop's
:class:`~trainers.methods.dp_dfa.DPDFA` and ``trainers.api``'s dp-dfa share these."""

from __future__ import annotations

from opu_hal import Device, DeviceUnavailable
from opu_hal.contract.errors import CalibrationError
from opu_hal.privacy import Event, FixedSizeGaussianEvent, PoissonGaussianEvent, PrivacyParameterError
from opu_hal.privacy.digitized_lattice import DigitizedLattice
from opu_hal.privacy.mechanisms import DigitizedRelease, GaussianRelease, SkellamRelease
from opu_hal.privacy.skellam import SkellamLattice
from opu_hal.randomness.secure_random import SecureGenerator

from ..core.errors import TrainingConfigError


def check_noise_device(device: Device | None) -> str:
    """``"skellam"`` (counts at 1 e-/DN), ``"digitized"`` (digitized reads at any gain), or refuse."""
    if device is None:
        raise TrainingConfigError("--noise-source device needs --profile (e.g. opu-sim-dp)")
    if device.capabilities.privacy_noise:
        return "skellam"
    if device.capabilities.digitized_noise:
        return "digitized"
    if not device.capabilities.privacy_noise:
        try:
            device.draw_privacy_counts(1, 1.0)
        except (DeviceUnavailable, CalibrationError) as exc:
            raise TrainingConfigError(f"--noise-source device: {exc}") from None
        raise TrainingConfigError(f"--noise-source device: profile {device.profile.label!r} is no privacy-noise source")


def device_lattice(
    device: Device | None, dimension: int, sensitivity: float, resolution: float, analysis: str
) -> SkellamLattice | DigitizedLattice:
    """The lattice of a device-noise release of a ``dimension``-vector of L2 ``sensitivity``:
    Skellam counts, or sums of digitized reads on a camera digitized at another gain (issue 36)."""
    lattice = SkellamLattice(dimension, sensitivity, resolution, analysis)
    if check_noise_device(device) != "digitized":
        return lattice
    if analysis != "per-coordinate":
        raise TrainingConfigError(
            "--noise-source device on a digitized camera is accounted per "
            "coordinate: drop --rounding-analysis worst-case"
        )
    try:
        if "speckle_values_per_draw" in device.capabilities.settable:  # type: ignore[union-attr]
            device.set_options(speckle_values_per_draw=dimension)  # type: ignore[union-attr]
        return DigitizedLattice(lattice, device.digitized_read_law())  # type: ignore[union-attr]
    except (DeviceUnavailable, PrivacyParameterError) as exc:
        raise TrainingConfigError(f"--noise-source device: {exc}") from None


def dp_dfa_release(
    z: float,
    sensitivity: float,
    lattice: SkellamLattice | DigitizedLattice | None,
    device: Device | None,
    generator: SecureGenerator,
) -> GaussianRelease | SkellamRelease | DigitizedRelease:
    """The mechanism releasing the update at noise multiplier ``z``: software Gaussian ``z Delta``
    without a lattice, else the device's counts or reads planned for ``z`` on ``lattice``."""
    if lattice is None:
        return GaussianRelease(z * sensitivity, generator)
    if isinstance(lattice, DigitizedLattice):
        return DigitizedRelease(device, lattice, lattice.reads(z), generator)  # type: ignore[arg-type]
    return SkellamRelease(device, lattice, lattice.poisson_mean(z), generator)  # type: ignore[arg-type]


def step_event(
    lattice: SkellamLattice | DigitizedLattice | None,
    dataset_size: int,
    batch_size: int,
    z: float,
    sampling: str = "fixed",
) -> Event:
    """One step's accounting event: the sampled Gaussian (fixed-size or Poisson), or the lattice's
    discrete event under the same sampling."""
    if lattice is None:
        if sampling == "poisson":
            return PoissonGaussianEvent(batch_size / dataset_size, z)
        return FixedSizeGaussianEvent(dataset_size, batch_size, z)
    return lattice.event(dataset_size, batch_size, z, sampling)
