"""Whether a calibration was taken on the device (or profile) at hand: backend, seed, sizes, mode,
serial and every physics key must match."""

from __future__ import annotations

from pathlib import Path

from ..contract.errors import CalibrationError
from .run import device_identity, profile_identity
from .schema import Calibration, DeviceIdentity


def check_identity(calibration: Calibration, device, path: Path) -> None:
    """Refuse a calibration taken on another device than ``device`` (see :func:`check_matches`)."""
    check_matches(calibration, device_identity(device), device.profile.label, path)


def check_profile(calibration: Calibration, profile, path: Path) -> None:
    """Refuse a calibration taken on another device than ``profile`` describes: the same check as
    :func:`check_identity`, so ``plan`` and ``train`` accept and refuse the same files."""
    check_matches(calibration, profile_identity(profile, profile.mode), profile.label, path)


def check_matches(calibration: Calibration, mine: DeviceIdentity, label: str, path: Path) -> None:
    """Refuse a calibration whose identity differs from ``mine`` (backend, seed, sizes, mode, serial
    and every physics key), naming the first key that differs."""
    theirs = calibration.device
    if theirs.physics is None:
        raise CalibrationError(
            f"{path}: key 'device.physics' is missing: the file does not say which camera "
            "it measured (written before issue 32); re-run `opu-hal calibrate`"
        )
    differences = [
        (f"device.{key}", value, getattr(mine, key))
        for key, value in theirs.model_dump().items()
        if key not in ("profile", "physics") and getattr(mine, key) != value
    ]
    physics = mine.physics or {}
    differences += [
        (f"device.physics.{key}", theirs.physics.get(key), physics.get(key))
        for key in sorted(set(theirs.physics) | set(physics))
        if theirs.physics.get(key) != physics.get(key)
    ]
    if differences:
        key, value, own = differences[0]
        raise CalibrationError(
            f"{path}: key '{key}' is {value!r} but this device ({label!r}) has {own!r}: the calibration was "
            f"taken on another device ({len(differences)} key(s) differ); re-run `opu-hal calibrate`"
        )
