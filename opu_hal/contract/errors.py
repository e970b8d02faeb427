"""Typed errors of the hardware path; every message says what went wrong and what to do."""

from __future__ import annotations


class OpuHalError(Exception):
    """Base class of every error opu_hal raises on purpose."""


class ProfileError(OpuHalError, ValueError):
    """A device profile is missing, malformed, or holds a value outside its allowed range."""


class DeviceUnavailable(OpuHalError, RuntimeError):
    """The device cannot be reached or acquired (no hardware, no SDK, closed device)."""


class DeviceBusy(DeviceUnavailable):
    """The device is held by another process (LightOn's ``ProcessRunningException``)."""


class HostMemoryError(OpuHalError, MemoryError):
    """The host, not the device, ran out of memory during a device call (not retried)."""


class DeviceTimeout(OpuHalError, TimeoutError):
    """The device did not answer within the allowed time, retries included."""


class InputError(OpuHalError, ValueError):
    """A batch handed to a device does not fit its capabilities (shape, values, kind)."""


class ParameterError(OpuHalError, ValueError):
    """A value handed to an opu_hal object is outside its allowed range (names it and the range)."""


class CalibrationError(OpuHalError, ValueError):
    """A calibration cannot be taken, read, or used here (file, key, range or device named)."""


class AnchorDrift(DeviceUnavailable):
    """A re-read of the privacy anchor fell below its calibrated bounds: the run stops before the next
    draw (the steps drawn so far are charged; recalibrate, then resume)."""
