"""The device contract every backend implements."""

from __future__ import annotations

import math
import warnings
from abc import ABC, abstractmethod
from types import TracebackType
from typing import Any, Generic, TypeVar

import torch

from .calibration import NoiseCalibration
from .capabilities import Capabilities
from .errors import DeviceUnavailable, InputError
from .frames import RawFrames
from .inputs import check_batch
from .noise import DigitizedReadLaw, NoiseReport, PrivacyCounts, Projection
from .profile_base import BaseProfile

P = TypeVar("P", bound=BaseProfile)


class Device(ABC, Generic[P]):
    """A noisy random projection ``p = B x + g`` of a batch ``x`` (paper 000, eq. 5).

    Built by :func:`opu_hal.load_device` from a profile. Acquisition of the hardware is explicit
    (:meth:`open` or ``with device:``); :meth:`project` opens a device that was not opened yet,
    and refuses once it is closed. Input is checked against :attr:`capabilities` before anything
    reaches the backend, so a bad batch leaves the device usable.
    """

    def __init__(self, profile: P) -> None:
        self._profile = profile
        self._is_open = False
        self._closed = False
        self._capabilities: Capabilities | None = None
        self._calibration: NoiseCalibration | None = None

    # -- description -------------------------------------------------------------------------
    @property
    def profile(self) -> P:
        return self._profile

    @property
    def in_features(self) -> int:
        return self._profile.in_features

    @property
    def out_features(self) -> int:
        return self._profile.out_features

    @property
    def capabilities(self) -> Capabilities:
        """What the device accepts and returns: built once (:meth:`_describe`), so a batch accepted
        now is accepted later; host memory is checked when a batch is projected."""
        if self._capabilities is None:
            self._capabilities = self._describe()
        return self._capabilities

    @abstractmethod
    def _describe(self) -> Capabilities:
        """Backend hook: the device's capabilities (called once)."""

    # -- calibration (optional) ------------------------------------------------------------------
    @property
    def calibration(self) -> NoiseCalibration | None:
        """The calibration the device reports its noise from (``None``: its declared model)."""
        return self._calibration

    def attach_calibration(self, calibration: NoiseCalibration) -> None:
        """Report noise from ``calibration`` from now on (done by :func:`opu_hal.load_device`).
        The calibration checks it was measured on this device; a backend without a camera refuses."""
        self.check_calibratable()
        calibration.check_device(self)
        self._calibration = calibration
        self._capabilities = None  # the settable ranges narrow to the calibrated ones
        self._use_calibration(calibration)

    def check_calibratable(self) -> None:
        """Raise :class:`DeviceUnavailable` unless ``capabilities.calibratable``."""
        if not self.capabilities.calibratable:
            raise DeviceUnavailable(
                f"profile {self._profile.label!r} ({self._profile.backend}) has no camera a "
                "calibration could describe; use a simulated or lighton profile"
            )

    def _use_calibration(self, calibration: NoiseCalibration) -> None:
        """Backend hook: take ``calibration`` into account (the base stores it in :attr:`calibration`)."""

    def raw_frames(
        self,
        illumination: str,
        n_frames: int,
        *,
        exposure_us: float | None = None,
        anchor_power_uw: float | None = None,
        pattern: torch.Tensor | None = None,
    ) -> RawFrames:
        """``n_frames`` raw camera frames in DN (:class:`~opu_hal.contract.frames.RawFrames`) of one
        ``illumination`` (``"dark"``, ``"anchor"`` at ``anchor_power_uw``, or ``"signal"``: the
        speckle of one input ``pattern``) at ``exposure_us``: what calibration measures. Only devices
        whose ``capabilities.raw_frames`` is true give them; others raise :class:`DeviceUnavailable`."""
        raise DeviceUnavailable(f"profile {self._profile.label!r} ({self._profile.backend}) gives no raw camera frames")

    @abstractmethod
    def noise_report(self) -> NoiseReport:
        """The noise a projection made now would carry (input-independent part)."""

    # -- run-time options (Qiskit's ``set_options``) ----------------------------------------------
    def set_options(self, **options: float) -> None:
        """Change run-time settings (e.g. ``temperature_c``, ``noise_std``) for later projections.

        Every option must be declared in :attr:`Capabilities.settable` and lie in its range;
        otherwise :class:`InputError` names the option, the value and the allowed range, and no
        option is changed.
        """
        settable = self.capabilities.settable
        checked: dict[str, float] = {}
        for name, value in options.items():
            if name not in settable:
                allowed = ", ".join(f"{n} in [{lo}, {hi}] {u}" for n, (lo, hi, u) in settable.items())
                raise InputError(
                    f"option {name!r} is not settable on {self._profile.label!r} "
                    f"({self._profile.backend}); settable: {allowed or 'none'}"
                )
            low, high, unit = settable[name]
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not (math.isfinite(value) and low <= value <= high)
            ):
                raise InputError(
                    f"option {name} = {value!r} is outside its allowed range [{low}, {high}] {unit} "
                    f"on {self._profile.label!r}"
                )
            checked[name] = float(value)
        if checked:
            self._apply_options(checked)

    def _apply_options(self, options: dict[str, float]) -> None:
        """Backend hook: apply options already checked against :attr:`Capabilities.settable`."""
        raise InputError(f"{type(self).__name__} declares settable options but cannot apply them")

    def _deprecated_setter(self, old: str, **options: float) -> None:
        warnings.warn(
            f"{type(self).__name__}.{old} is deprecated; use set_options({', '.join(f'{k}=...' for k in options)})",
            DeprecationWarning,
            stacklevel=3,
        )
        self.set_options(**options)

    # -- life cycle ----------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    def open(self) -> Device[P]:
        """Acquire the device (a no-op for software backends); returns the device."""
        if self._closed:
            raise DeviceUnavailable(f"device {self._profile.label!r} is closed; load it again")
        if not self._is_open:
            self._acquire()
            self._is_open = True
        return self

    def close(self) -> None:
        """Release the device; further projections raise :class:`DeviceUnavailable`. The device
        counts as closed even when releasing fails (the error propagates; no second release)."""
        if not self._closed:
            try:
                if self._is_open:
                    self._release()
            finally:
                self._closed = True
                self._is_open = False

    def __enter__(self) -> Device[P]:
        return self.open()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- projection ----------------------------------------------------------------------------
    def project(self, x: Any) -> Projection:
        """Project a batch ``(n, in_features)``; returns values ``(n, out_features)`` and noise."""
        self.open()
        batch = check_batch(x, self.in_features, self.capabilities)
        self._check_memory(batch.shape[0])
        projection = self._project(batch)
        if not bool(torch.isfinite(projection.values).all()):
            raise InputError(
                f"the projection of this finite batch overflowed to inf/NaN (largest |x| = "
                f"{float(batch.abs().max()):.4g}); scale the inputs down"
            )
        return projection

    def draw_privacy_counts(self, n_values: int, poisson_mean: float) -> PrivacyCounts:
        """``n_values`` integer noise values, each the difference of two independent sums of
        photo-electron counts whose Poisson means are at least ``poisson_mean`` (Skellam noise;
        :mod:`opu_hal.privacy.skellam`), drawn from a secure generator. Devices that cannot
        guarantee that (``capabilities.privacy_noise`` is false) raise :class:`DeviceUnavailable`."""
        raise DeviceUnavailable(
            f"profile {self._profile.label!r} ({self._profile.backend}) cannot serve as a privacy-noise "
            "source: it does not produce photo-electron counts of a known distribution"
        )

    def digitized_read_law(self) -> DigitizedReadLaw:
        """The law of one anchor-only read that :meth:`draw_digitized_counts` sums (intervals from the
        calibration when one is attached). Devices whose ``capabilities.digitized_noise`` is false raise."""
        raise DeviceUnavailable(
            f"profile {self._profile.label!r} ({self._profile.backend}) has no digitized camera "
            "reads to serve as privacy noise"
        )

    def draw_digitized_counts(self, n_values: int, reads: int) -> PrivacyCounts:
        """``n_values`` integer noise values in DN, each ``C_1 - C_2`` of two independent sums of ``reads``
        anchor-only reads of :meth:`digitized_read_law` (any gain), drawn from a secure generator."""
        raise DeviceUnavailable(
            f"profile {self._profile.label!r} ({self._profile.backend}) has no digitized camera "
            "reads to serve as privacy noise"
        )

    def _check_memory(self, rows: int) -> None:
        """Backend hook: refuse, with :class:`HostMemoryError`, a batch of ``rows`` whose projection
        would not fit in the host memory left now (:func:`opu_hal.runtime.memory.check_rows_fit`)."""

    @abstractmethod
    def _project(self, x: torch.Tensor) -> Projection:
        """Backend projection of an already validated batch."""

    def _acquire(self) -> None:
        """Backend hook: take hold of the hardware."""

    def _release(self) -> None:
        """Backend hook: let go of the hardware."""

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("open" if self._is_open else "ready")
        return f"<{type(self).__name__} {self._profile.label!r} {self.in_features}->{self.out_features} {state}>"
