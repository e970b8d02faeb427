"""opu-hal: one device interface for optical processing units, simulated OPUs and torch.

User code needs :func:`load_device`; everything a projection returns is in :class:`Projection`.
"""

from .capabilities import Capabilities, InputKind, OutputKind
from .device import Device
from .errors import (DeviceBusy, DeviceTimeout, DeviceUnavailable, HostMemoryError, InputError, OpuHalError,
                     ProfileError)
from .loader import load_device
from .noise import NoiseReport, Projection
from .profile_base import BaseProfile
from .profiles import list_profiles, load_profile, validate_profile
from .backends.lighton_profile import LightonProfile
from .backends.simulated.profile import SimulatedProfile
from .backends.torch_profile import TorchProfile
from .ternary import combine_independent, project_ternary
from .backend_spec import INTERFACE_VERSION, BackendSpec
from .registry import backend_names, get_backend, register_backend, unregister_backend

__version__ = "0.1.0"

__all__ = [
    "BackendSpec",
    "INTERFACE_VERSION",
    "BaseProfile",
    "Capabilities",
    "Device",
    "DeviceBusy",
    "DeviceTimeout",
    "HostMemoryError",
    "DeviceUnavailable",
    "InputError",
    "InputKind",
    "LightonProfile",
    "NoiseReport",
    "OpuHalError",
    "OutputKind",
    "ProfileError",
    "Projection",
    "SimulatedProfile",
    "TorchProfile",
    "backend_names",
    "combine_independent",
    "get_backend",
    "list_profiles",
    "load_device",
    "load_profile",
    "project_ternary",
    "register_backend",
    "unregister_backend",
    "validate_profile",
]
