"""The project's cache folder (``$OPU_HAL_CACHE``, else ``~/.cache/opu-hal``) and small JSON entries in
it, each stored with the key it was computed for and read back only under that same key.

A cache that cannot be read or written costs time, never a result: a missing, unreadable, corrupt or
differently keyed entry reads as absent, and a failed write is ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

CACHE_ENV = "OPU_HAL_CACHE"


def cache_dir() -> Path:
    """``$OPU_HAL_CACHE`` when set, else ``~/.cache/opu-hal`` (the feature cache's folder too)."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "opu-hal")


def cache_key(*parts: object) -> str:
    """A hex digest of ``parts`` (their ``repr``): every input an entry depends on goes in."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def _entry_path(folder: str, key: str) -> Path:
    return cache_dir() / folder / f"{key[:40]}.json"


def read_entry(folder: str, key: str) -> Any | None:
    """The value stored under ``key`` in ``folder``, or None (absent, unreadable, or another key's)."""
    try:
        with open(_entry_path(folder, key), encoding="utf-8") as handle:
            stored = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(stored, dict) or stored.get("key") != key:
        return None
    return stored.get("value")


def write_entry(folder: str, key: str, value: Any) -> None:
    """Store ``value`` (JSON) under ``key`` in ``folder``, atomically (a reader sees all or nothing)."""
    path = _entry_path(folder, key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False, encoding="utf-8") as tmp:
            json.dump({"key": key, "value": value}, tmp)
        os.replace(tmp.name, path)
    except (OSError, TypeError, ValueError):
        try:
            os.unlink(tmp.name)
        except (OSError, NameError):
            pass
