"""What the run options' help texts say about the methods (their names, each option's defaults per
method, the tunable settings), kept on disk so that ``--help`` answers without importing torch.

The facts come from the method registry, which imports every method and torch (seconds). They are
computed once and stored in the project's cache folder (:mod:`opu_hal.runtime.cache`) under a key made
of everything they depend on: the version, the Python version, every source file of the ``trainers``
and ``opu_hal`` packages (path, size, modification time) and the installed command plugins (which may register
methods). Any change, or an unreadable entry, recomputes them; when the registry is already imported
they are read from it directly. Help text only: no result and no privacy figure is ever read from here.
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

import opu_hal
from opu_hal.contract.version import __version__

CACHE_FOLDER = "cli-help"
_PACKAGE = Path(__file__).resolve().parent.parent
_HAL = Path(opu_hal.__file__).resolve().parent


def sources_fingerprint(package: Path = _PACKAGE) -> list[tuple[str, int, int]]:
    """Path, size and modification time (ns) of every ``.py`` file under ``package``, sorted."""
    found = []
    for folder, _, names in os.walk(package):
        for name in names:
            if name.endswith(".py"):
                stat = os.stat(os.path.join(folder, name))
                found.append((os.path.relpath(os.path.join(folder, name), package), stat.st_size, stat.st_mtime_ns))
    return sorted(found)


def facts_key() -> str:
    """The cache key of the help facts: version, Python, the sources of ``trainers`` and ``opu_hal`` (method
    defaults may name opu_hal's constants), the command plugins."""
    from opu_hal.runtime.cache import cache_key  # hashlib: only when help is printed

    plugins = sorted((e.name, e.value) for e in metadata.entry_points(group="opu_hal.commands"))
    sources = (str(_PACKAGE), sources_fingerprint(), str(_HAL), sources_fingerprint(_HAL))
    return cache_key(__version__, sys.version, sources, plugins)


def per_method_defaults(dest: str) -> str:
    """``dest``'s default for each method, grouped by value: ``default per method: 256 (bp, dfa); 128
    (dp-sgd)``, or ``default 15`` when every method has the same (read from the registry)."""
    from dataclasses import MISSING, fields

    from ..methods import METHODS
    from ..run.config import TrainConfig

    base = {f.name: f.default for f in fields(TrainConfig) if f.default is not MISSING}
    groups: dict[str, list[str]] = {}
    for name, cls in METHODS.items():
        value = cls.default_profile if dest == "profile" else cls.defaults.get(dest, base.get(dest))
        if isinstance(value, tuple):
            value = ",".join(str(v) for v in value) or '""'
        groups.setdefault("none" if value is None else str(value), []).append(name)
    if len(groups) == 1:
        return f"default {next(iter(groups))}"
    return "default per method: " + "; ".join(f"{value} ({', '.join(names)})" for value, names in groups.items())


def compute_facts() -> dict[str, Any]:
    """The facts from the registry itself (imports every method, and torch)."""
    from dataclasses import fields

    from ..methods import method_names
    from ..run.config import TrainConfig
    from .tune import TUNABLE

    dests = sorted({f.name for f in fields(TrainConfig)} | {"profile"})
    return {
        "methods": list(method_names()),
        "per_method": {dest: per_method_defaults(dest) for dest in dests},
        "tunable": ", ".join(sorted(TUNABLE)),
    }


def _valid(facts: Any) -> bool:
    return (
        isinstance(facts, dict)
        and isinstance(facts.get("methods"), list)
        and all(isinstance(name, str) for name in facts["methods"])
        and isinstance(facts.get("per_method"), dict)
        and all(isinstance(text, str) for text in facts["per_method"].values())
        and isinstance(facts.get("tunable"), str)
    )


def registry_imported() -> bool:
    """Whether this process has imported the method registry (then it is read directly, at no cost)."""
    return "trainers.methods" in sys.modules


def help_facts() -> dict[str, Any]:
    """The facts: from the registry when it is already imported, else from the cache, else computed
    (and stored)."""
    return compute_facts() if registry_imported() else _stored_facts()


@lru_cache(maxsize=1)
def _stored_facts() -> dict[str, Any]:
    from opu_hal.runtime.cache import read_entry, write_entry

    key = facts_key()
    stored = read_entry(CACHE_FOLDER, key)
    if isinstance(stored, dict) and _valid(stored):
        return stored
    facts = compute_facts()
    write_entry(CACHE_FOLDER, key, facts)
    return facts


def per_method_text(dest: str) -> str:
    """:func:`per_method_defaults` of ``dest``: from the registry when it is imported, else the facts."""
    if registry_imported():
        return per_method_defaults(dest)
    text = _stored_facts()["per_method"].get(dest)
    return text if isinstance(text, str) else per_method_defaults(dest)


def known_method_names() -> list[str]:
    """The registered methods' names (:func:`help_facts`)."""
    names: list[str] = help_facts()["methods"]
    return names


def tunable_text() -> str:
    """The tunable settings, comma-separated (:func:`help_facts`)."""
    text: str = help_facts()["tunable"]
    return text
