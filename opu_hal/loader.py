"""``load_device``: the one constructor user code needs."""

from __future__ import annotations

import os

from .device import Device
from .profile_base import BaseProfile
from .profiles import load_profile
from .registry import get_backend


def load_device(profile: str | os.PathLike[str] | BaseProfile) -> Device:
    """Build the device a profile describes; the profile's ``backend`` alone picks the backend.

    ``profile`` is a path to a TOML profile, a profile name found in ``device_profiles/``, or an
    already validated profile object.
    """
    validated = load_profile(profile)
    return get_backend(validated.backend).create(validated)
