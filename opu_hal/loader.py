"""``load_device``: the one constructor user code needs."""

from __future__ import annotations

import os
from pathlib import Path

from .calibration.calibrated import calibration_path, load_calibrated_noise
from .calibration.schema import Calibration
from .contract.device import Device
from .contract.profile_base import BaseProfile
from .profiles.catalogue import load_profile
from .profiles.registry import get_backend


def load_device(
    profile: str | os.PathLike[str] | BaseProfile, calibration: str | os.PathLike[str] | Calibration | None = None
) -> Device:
    """Build the device a profile describes; the profile's ``backend`` alone picks the backend.

    ``profile`` is a path to a TOML profile, a profile name found in ``device_profiles/``, or an
    already validated profile object. ``calibration`` (a file written by ``opu-hal calibrate``,
    relative paths against the working directory, or a :class:`~opu_hal.calibration.schema.Calibration`)
    makes the device report the measured noise; without it, the profile's own ``calibration``
    key is used (relative to the profile file), if any. A calibration of another device is refused.
    """
    validated = load_profile(profile)
    device = get_backend(validated.backend).create(validated)
    source: str | os.PathLike[str] | Calibration | Path | None = calibration
    if source is None and validated.calibration is not None:
        source = calibration_path(validated)
    if source is not None:
        device.check_calibratable()
        device.attach_calibration(load_calibrated_noise(source, validated))
    return device
