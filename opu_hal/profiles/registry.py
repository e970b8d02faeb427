"""Backends keyed by name, found through entry points (built-ins too) or registered in-process.

Every backend, built-in or third-party, exposes a :class:`BackendSpec` under the entry-point
group ``opu_hal.backends``; its profile model then joins the profile union and ``load_device``
builds its devices, with no change to opu_hal. A spec written against another major
:data:`~opu_hal.contract.backend_spec.INTERFACE_VERSION` is refused with a warning.

The built-ins are also listed in :data:`BUILTIN_SPECS` and loaded from there when the installed
metadata does not declare them (a stale editable install, a source checkout on ``sys.path``).
"""

from __future__ import annotations

import importlib
import warnings
from importlib import metadata
from typing import Any, Literal

from ..contract.backend_spec import INTERFACE_VERSION, BackendSpec, interface_major
from ..contract.errors import OpuHalError, ProfileError

ENTRY_POINT_GROUP = "opu_hal.backends"
BUILTIN_SPECS: dict[str, str] = {
    "torch": "opu_hal.backends.torch_profile:SPEC",
    "simulated": "opu_hal.backends.simulated.profile:SPEC",
    "lighton": "opu_hal.backends.lighton_profile:SPEC",
}
Origin = Literal["entry point", "built-in fallback", "registered"]
# What a plugin's import may raise without taking the other backends or commands down: its
# exceptions, and a ``sys.exit()`` or ``KeyboardInterrupt`` raised by the import itself.
PLUGIN_FAILURES = (Exception, SystemExit, KeyboardInterrupt)

_registered: dict[str, BackendSpec] = {}
_discovered: dict[str, tuple[BackendSpec, Origin]] | None = None


def register_backend(spec: BackendSpec, *, replace: bool = False) -> None:
    """Register a backend in this process (entry points do the same across installs)."""
    if spec.name in _all() and not replace:
        raise OpuHalError(f"backend {spec.name!r} is already registered; pass replace=True")
    problem = spec.problem() if isinstance(spec, BackendSpec) else "it is not an opu_hal.BackendSpec"
    if problem is not None:
        raise OpuHalError(f"backend {getattr(spec, 'name', spec)!r} cannot be registered: {problem}")
    if not _compatible(spec, f"backend {spec.name!r}"):
        raise OpuHalError(
            f"backend {spec.name!r} implements interface {spec.interface_version}; "
            f"this opu_hal implements {INTERFACE_VERSION}"
        )
    _registered[spec.name] = spec


def unregister_backend(name: str) -> None:
    """Remove a backend registered with :func:`register_backend` (installed ones stay)."""
    _registered.pop(name, None)


def refresh_entry_points() -> None:
    """Forget discovered entry points, so the next lookup scans installed packages again."""
    global _discovered
    _discovered = None


def backend_names() -> list[str]:
    """Names of every available backend, built-ins first."""
    return list(_all())


def backend_origin(name: str) -> Origin:
    """How the backend ``name`` was found: its entry point, the built-in fallback, or in-process."""
    if name in _registered:
        return "registered"
    found = _discover()
    if name not in found:
        get_backend(name)  # raises the ProfileError listing the allowed names
    return found[name][1]


def get_backend(name: str) -> BackendSpec:
    """The backend registered under ``name``."""
    backends = _all()
    if name not in backends:
        allowed = ", ".join(repr(n) for n in backends)
        raise ProfileError(f"unknown backend {name!r}; allowed: {allowed}")
    return backends[name]


def _all() -> dict[str, BackendSpec]:
    return {**{name: spec for name, (spec, _) in _discover().items()}, **_registered}


def _compatible(spec: BackendSpec, where: str) -> bool:
    if interface_major(spec.interface_version) == interface_major(INTERFACE_VERSION):
        return True
    warnings.warn(
        f"{where} implements backend interface {spec.interface_version!r}, but this opu_hal "
        f"implements {INTERFACE_VERSION} (major versions differ); ignored. Install a version of "
        "the backend made for this opu_hal."
    )
    return False


def _load_spec(loader: Any, where: str) -> BackendSpec | None:
    """Call ``loader`` for a spec (or a callable returning one); None, with a warning, on failure."""
    try:
        spec = loader()
        if callable(spec) and not isinstance(spec, BackendSpec):
            spec = spec()
    except PLUGIN_FAILURES as exc:  # a broken plugin must not hide the other backends
        warnings.warn(f"{where} failed to load: {type(exc).__name__}: {exc}")
        return None
    if not isinstance(spec, BackendSpec):
        warnings.warn(f"{where} gave {type(spec).__name__}, not an opu_hal.BackendSpec; ignored")
        return None
    problem = spec.problem()
    if problem is not None:
        warnings.warn(f"{where}: backend {spec.name!r} is unusable: {problem}; ignored")
        return None
    return spec if _compatible(spec, where) else None


def _import_target(value: str) -> Any:
    module_name, _, attribute = value.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


def _unique_entries() -> list[metadata.EntryPoint]:
    """The group's entry points, each (name, value) once (an install seen twice on sys.path)."""
    seen, entries = set(), []
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if (entry.name, entry.value) not in seen:
            seen.add((entry.name, entry.value))
            entries.append(entry)
    return entries


def _first_claim(name: str, first: str, second: str) -> str:
    """Two entry points give a backend of the same ``name``: keep the built-in one, else the first
    found, and warn naming both (a plugin must not silently replace a backend)."""
    builtin = BUILTIN_SPECS.get(name)
    kept = builtin if builtin in (first, second) else first
    refused = second if kept == first else first
    warnings.warn(
        f"backend {name!r} is provided by both {first} and {second}; kept {kept}, refused {refused} "
        "(a plugin cannot replace another backend: give it its own name)"
    )
    return kept


def _discover() -> dict[str, tuple[BackendSpec, Origin]]:
    global _discovered
    if _discovered is None:
        from_entry_points: dict[str, BackendSpec] = {}
        claimed: dict[str, str] = {}  # backend name -> the entry point value that provides it
        for entry in _unique_entries():
            spec = _load_spec(entry.load, f"backend entry point {entry.name!r} ({entry.value})")
            if spec is None:
                continue
            if spec.name in claimed:
                kept = _first_claim(spec.name, claimed[spec.name], entry.value)
                if kept == entry.value:
                    from_entry_points[spec.name], claimed[spec.name] = spec, entry.value
                continue
            from_entry_points[spec.name], claimed[spec.name] = spec, entry.value
        found: dict[str, tuple[BackendSpec, Origin]] = {}
        for name, value in BUILTIN_SPECS.items():  # built-ins first, whichever way they came
            if name in from_entry_points and claimed[name] != value:  # a plugin under a built-in's name
                warnings.warn(
                    f"backend {name!r} is built into opu_hal ({value}); the entry point {claimed[name]} "
                    "that also provides it is refused (give the plugin its own name)"
                )
                del from_entry_points[name]
            if name in from_entry_points:
                found[name] = (from_entry_points.pop(name), "entry point")
            else:
                spec = _load_spec(lambda v=value: _import_target(v), f"built-in backend {name!r}")
                if spec is not None:
                    found[name] = (spec, "built-in fallback")
        found.update({name: (spec, "entry point") for name, spec in from_entry_points.items()})
        _discovered = found
    return _discovered
