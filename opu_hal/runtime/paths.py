"""Output paths checked before any work: a file path that can really be created, a plot format
matplotlib writes. Every refusal names the option and the path."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

PLOT_FORMATS = ("eps", "jpeg", "jpg", "pdf", "png", "ps", "svg", "svgz", "tif", "tiff", "webp")


def unwritable_reason(path: str | os.PathLike[str]) -> str | None:
    """Why a file cannot be written at ``path`` (None when it can). The nearest existing folder is
    probed by creating (and removing) a temporary entry there: permission bits alone miss /proc,
    read-only mounts and root's bypass of them."""
    target = Path(path)
    if target.is_dir():
        return "is a directory; give a file path"
    parent = target.parent if str(target.parent) else Path(".")
    existing = next((p for p in [parent, *parent.parents] if p.exists()), Path("."))
    if not existing.is_dir():
        return f"{existing} is not a folder"
    try:
        if existing == parent:
            with tempfile.NamedTemporaryFile(dir=existing, prefix=".opu-hal-probe-"):
                pass
        else:  # the missing folders would be created: probe creating one
            os.rmdir(tempfile.mkdtemp(dir=existing, prefix=".opu-hal-probe-"))
    except OSError as exc:
        return f"{existing} is not a writable folder ({exc.strerror or exc})"
    return None


def plot_format_reason(path: str | os.PathLike[str]) -> str | None:
    """Why matplotlib cannot write a plot at ``path`` by its extension (None when it can)."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in PLOT_FORMATS:
        return (
            f"the extension {('.' + suffix) if suffix else '(none)'} is not a plot format; "
            f"allowed: {', '.join('.' + s for s in PLOT_FORMATS)}"
        )
    return None


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two paths name the same file (resolved, whether or not it exists yet)."""
    return Path(a).resolve() == Path(b).resolve()
