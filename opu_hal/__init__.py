"""opu-hal: one device interface for optical processing units, simulated OPUs and torch.

User code needs :func:`load_device`; everything a projection returns is in :class:`Projection`.
"""

from .contract.capabilities import Capabilities, InputKind, OutputKind
from .contract.device import Device
from .contract.errors import (DeviceBusy, DeviceTimeout, DeviceUnavailable, HostMemoryError, InputError, OpuHalError,
                     ProfileError)
from .loader import load_device
from .contract.noise import NoiseReport, Projection
from .contract.profile_base import BaseProfile
from .profiles.catalogue import list_profiles, load_profile, validate_profile
from .backends.lighton_profile import LightonProfile
from .backends.simulated.profile import SimulatedProfile
from .backends.torch_profile import TorchProfile
from .contract.ternary import combine_independent, project_ternary
from .contract.backend_spec import INTERFACE_VERSION, BackendSpec
from .profiles.registry import backend_names, get_backend, register_backend, unregister_backend

from .contract.version import __version__

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
