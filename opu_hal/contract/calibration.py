"""What a device needs from a calibration: :class:`NoiseCalibration`.

A calibration (``opu_hal.calibration``, or a plugin's own) is handed to a device by
:func:`opu_hal.load_device` ``(profile, calibration=...)``; the device then reports the noise the
calibration measured, at its current temperature, and refuses operating points the calibration
does not cover. The contract names only what a device calls, so backends never import the
calibration package.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .noise import NoiseReport


@dataclass(frozen=True)
class ReadBox:
    """The calibrated box of one anchor-only read, every quantity of its law an interval ``(low, high)``:
    mean photo-electrons, read noise [e-] (its low end a bound over the pixels read, not a pooled mean),
    gain [e-/DN], black level [DN] and full well [e-]; and where they came from. A digitized privacy
    source is accounted at the worst point of it (:mod:`opu_hal.privacy.digitized_box`)."""

    mean_e: tuple[float, float]
    read_noise_e: tuple[float, float]
    gain_e_per_dn: tuple[float, float]
    black_level_dn: tuple[float, float]
    full_well_e: tuple[float, float]
    source: str


@runtime_checkable
class NoiseCalibration(Protocol):
    """A device's measured noise at the operating points it covers."""

    @property
    def temperature_range_c(self) -> tuple[float, float]:
        """The lowest and highest calibrated temperature: the device's settable range narrows to it."""

    def check_device(self, device: Any) -> None:
        """Given the :class:`~opu_hal.contract.device.Device` it is attached to, raise :class:`~opu_hal.contract.errors.CalibrationError` if it was measured on another device."""

    def check_operating_point(self, temperature_c: float, exposure_us: float) -> None:
        """Raise :class:`~opu_hal.contract.errors.InputError` outside the calibrated temperatures or exposures."""

    def report(self, temperature_c: float) -> NoiseReport:
        """The noise of a projection made at ``temperature_c``, with its data-independent lower bound."""

    def anchor_read_lower_e(self, temperature_c: float) -> tuple[float, str]:
        """Lower confidence bound on one anchor-only read's photo-electrons at the darkest pixel, and
        where it came from (the privacy-noise source plans its reads with it)."""

    def anchor_read_box(
        self, temperature_c: float
    ) -> tuple[tuple[float, float], tuple[float, float], tuple[float, float], str]:
        """Intervals of one anchor-only read's mean photo-electrons (darkest pixel's lower end to the mean
        pixel's upper end), of the read noise [e-] and of the gain [e-/DN], and where they came from:
        the box a digitized privacy-noise source is accounted over (its worst point)."""

    def digitized_read_box(self, temperature_c: float) -> ReadBox:
        """The whole law of one anchor-only read as measured (:class:`ReadBox`): nothing privacy-relevant
        comes from a profile's physics keys when a calibration is attached."""
