"""What a backend exports so opu_hal can find it: :class:`BackendSpec`.

Built-in and third-party backends alike expose one ``SPEC`` under the entry-point group
``opu_hal.backends`` (see :mod:`opu_hal.profiles.registry`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .profile_base import BaseProfile

if TYPE_CHECKING:
    from .device import Device

# Version of the backend interface (the Device contract and BackendSpec) as "MAJOR.MINOR".
# A backend built against another MAJOR is refused; MINOR changes are backward compatible.
INTERFACE_VERSION = "1.0"

DeviceFactory = Callable[[BaseProfile], "Device[Any]"]


def interface_major(version: str) -> int:
    """The major number of a ``"MAJOR.MINOR"`` interface version (-1 when unreadable)."""
    try:
        return int(str(version).split(".")[0])
    except ValueError:
        return -1


@dataclass(frozen=True)
class BackendSpec:
    """A backend: its name (the profile's ``backend`` value), profile model and device factory.

    ``factory`` is a callable or a ``"module:attribute"`` string imported on first use, so that a
    backend's heavy imports (an SDK) happen only when one of its devices is built.
    ``interface_version`` is the :data:`INTERFACE_VERSION` the backend was written against.
    """

    name: str
    profile_model: type[BaseProfile]
    factory: DeviceFactory | str
    interface_version: str = INTERFACE_VERSION

    def problem(self) -> str | None:
        """What makes this spec unusable (a profile model that is no pydantic profile model, a
        factory that is neither callable nor a ``"module:attribute"`` string), or None."""
        model = self.profile_model
        if not (isinstance(model, type) and issubclass(model, BaseProfile)):
            return f"its profile model {model!r} is not a subclass of opu_hal.BaseProfile"
        factory = self.factory
        if not (callable(factory) or (isinstance(factory, str) and ":" in factory)):
            return f"its factory {factory!r} is neither callable nor a 'module:attribute' string"
        return None

    def create(self, profile: BaseProfile) -> Device[Any]:
        """A device of ``profile``; a factory that cannot be imported, fails untyped or returns no
        :class:`~opu_hal.contract.device.Device` is a :class:`~opu_hal.contract.errors.DeviceUnavailable` naming the backend."""
        from .device import Device
        from .errors import DeviceUnavailable, OpuHalError

        try:
            factory = self.factory
            if isinstance(factory, str):
                module_name, _, attribute = factory.partition(":")
                factory = getattr(importlib.import_module(module_name), attribute)
            device = factory(profile)
        except OpuHalError:
            raise
        except Exception as exc:  # a plugin's bug must not surface as a traceback
            raise DeviceUnavailable(
                f"backend {self.name!r}: its device factory {self.factory!r} failed for profile "
                f"{profile.label!r}: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(device, Device):
            raise DeviceUnavailable(
                f"backend {self.name!r}: its device factory {self.factory!r} returned "
                f"{type(device).__name__}, not an opu_hal Device"
            )
        return device
