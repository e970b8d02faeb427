"""Backends keyed by name: the built-ins, plus third-party ones found through entry points.

A third-party package exposes a :class:`BackendSpec` under the entry-point group
``opu_hal.backends``; its profile model then joins the profile union and ``load_device`` builds
its devices, with no change to opu_hal.
"""

from __future__ import annotations

import importlib
import warnings
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING, Callable, Union

from .errors import OpuHalError, ProfileError
from .profiles import BaseProfile, LightonProfile, SimulatedProfile, TorchProfile

if TYPE_CHECKING:
    from .device import Device

ENTRY_POINT_GROUP = "opu_hal.backends"
DeviceFactory = Callable[[BaseProfile], "Device"]


@dataclass(frozen=True)
class BackendSpec:
    """A backend: its name (the profile's ``backend`` value), profile model and device factory.

    ``factory`` is a callable or a ``"module:attribute"`` string imported on first use, so that a
    backend's heavy imports (an SDK) happen only when one of its devices is built.
    """

    name: str
    profile_model: type[BaseProfile]
    factory: Union[DeviceFactory, str]

    def create(self, profile: BaseProfile) -> "Device":
        factory = self.factory
        if isinstance(factory, str):
            module_name, _, attribute = factory.partition(":")
            factory = getattr(importlib.import_module(module_name), attribute)
        return factory(profile)


_BUILTINS: dict[str, BackendSpec] = {
    "torch": BackendSpec("torch", TorchProfile, "opu_hal.backends.torch_backend:TorchDevice"),
    "simulated": BackendSpec(
        "simulated", SimulatedProfile, "opu_hal.backends.simulated.device:SimulatedDevice"
    ),
    "lighton": BackendSpec("lighton", LightonProfile, "opu_hal.backends.lighton:LightonDevice"),
}
_registered: dict[str, BackendSpec] = {}
_discovered: dict[str, BackendSpec] | None = None


def register_backend(spec: BackendSpec, *, replace: bool = False) -> None:
    """Register a backend in this process (entry points do the same across installs)."""
    if spec.name in _all() and not replace:
        raise OpuHalError(f"backend {spec.name!r} is already registered; pass replace=True")
    _registered[spec.name] = spec


def unregister_backend(name: str) -> None:
    """Remove a backend registered with :func:`register_backend` (built-ins stay)."""
    _registered.pop(name, None)


def refresh_entry_points() -> None:
    """Forget discovered entry points, so the next lookup scans installed packages again."""
    global _discovered
    _discovered = None


def backend_names() -> list[str]:
    """Names of every available backend, built-ins first."""
    return list(_all())


def get_backend(name: str) -> BackendSpec:
    """The backend registered under ``name``."""
    backends = _all()
    if name not in backends:
        allowed = ", ".join(repr(n) for n in backends)
        raise ProfileError(f"unknown backend {name!r}; allowed: {allowed}")
    return backends[name]


def _all() -> dict[str, BackendSpec]:
    return {**_BUILTINS, **_entry_point_backends(), **_registered}


def _entry_point_backends() -> dict[str, BackendSpec]:
    global _discovered
    if _discovered is None:
        found: dict[str, BackendSpec] = {}
        for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                spec = entry.load()
                if callable(spec) and not isinstance(spec, BackendSpec):
                    spec = spec()
            except Exception as exc:  # a broken plugin must not hide the other backends
                warnings.warn(f"backend entry point {entry.name!r} ({entry.value}) failed to load: {exc}")
                continue
            if not isinstance(spec, BackendSpec):
                warnings.warn(
                    f"backend entry point {entry.name!r} ({entry.value}) gave {type(spec).__name__}, "
                    "not an opu_hal.BackendSpec; ignored"
                )
                continue
            found[spec.name] = spec
        _discovered = found
    return _discovered
