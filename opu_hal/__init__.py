"""opu-hal: one device interface for optical processing units, simulated OPUs and torch.

User code needs :func:`load_device`; everything a projection returns is in :class:`Projection`.
The names below are imported on first use (PEP 562), so ``import opu_hal`` and ``opu-hal --help``
load neither torch nor the backends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .contract.version import __version__
from .runtime.lazy import lazy_exports

#: Public name -> the module that defines it (relative to this package).
_EXPORTS = {
    "BackendSpec": ".contract.backend_spec",
    "INTERFACE_VERSION": ".contract.backend_spec",
    "BaseProfile": ".contract.profile_base",
    "Capabilities": ".contract.capabilities",
    "InputKind": ".contract.capabilities",
    "OutputKind": ".contract.capabilities",
    "Device": ".contract.device",
    "DeviceBusy": ".contract.errors",
    "DeviceTimeout": ".contract.errors",
    "DeviceUnavailable": ".contract.errors",
    "HostMemoryError": ".contract.errors",
    "InputError": ".contract.errors",
    "OpuHalError": ".contract.errors",
    "ProfileError": ".contract.errors",
    "NoiseReport": ".contract.noise",
    "Projection": ".contract.noise",
    "combine_independent": ".contract.ternary",
    "project_ternary": ".contract.ternary",
    "load_device": ".loader",
    "list_profiles": ".profiles.catalogue",
    "load_profile": ".profiles.catalogue",
    "validate_profile": ".profiles.catalogue",
    "LightonProfile": ".backends.lighton_profile",
    "SimulatedProfile": ".backends.simulated.profile",
    "TorchProfile": ".backends.torch_profile",
    "backend_names": ".profiles.registry",
    "get_backend": ".profiles.registry",
    "register_backend": ".profiles.registry",
    "unregister_backend": ".profiles.registry",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # what type checkers and readers see; the same modules as _EXPORTS
    from .backends.lighton_profile import LightonProfile
    from .backends.simulated.profile import SimulatedProfile
    from .backends.torch_profile import TorchProfile
    from .contract.backend_spec import INTERFACE_VERSION, BackendSpec
    from .contract.capabilities import Capabilities, InputKind, OutputKind
    from .contract.device import Device
    from .contract.errors import (
        DeviceBusy,
        DeviceTimeout,
        DeviceUnavailable,
        HostMemoryError,
        InputError,
        OpuHalError,
        ProfileError,
    )
    from .contract.noise import NoiseReport, Projection
    from .contract.profile_base import BaseProfile
    from .contract.ternary import combine_independent, project_ternary
    from .loader import load_device
    from .profiles.catalogue import list_profiles, load_profile, validate_profile
    from .profiles.registry import backend_names, get_backend, register_backend, unregister_backend
