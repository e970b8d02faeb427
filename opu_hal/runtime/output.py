"""What a command writes to stdout and when it may start: one JSON document for ``--json``, output
folders that exist, a reader of stdout that went away (``opu-hal devices --json | head``).

Every command that prints data prints it through :func:`print_json`, so ``--json`` output is the
same everywhere: one indented JSON document on stdout, nothing else there (progress and logs go to
stderr)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from .paths import unwritable_reason

#: The options whose value is a file a command writes; their folder must exist before it starts.
OUTPUT_OPTIONS = ("--out", "--plot")
#: The exit status of a process killed by SIGPIPE (128 + 13), as a shell reports it.
EXIT_BROKEN_PIPE = 141


def add_json_option(p: argparse.ArgumentParser, help: str = "print the result as JSON") -> None:
    """``--json``: the command prints one JSON document on stdout (:func:`print_json`) and nothing else
    there."""
    p.add_argument("--json", action="store_true", help=help)


def print_json(data: Any) -> None:
    """Print ``data`` as one indented JSON document on stdout (the ``--json`` convention)."""
    print(json.dumps(data, indent=2))


def missing_folder(path: str | os.PathLike[str]) -> Path | None:
    """The folder ``path`` would be written into, when it does not exist (None when it does)."""
    folder = Path(path).parent
    return None if not str(path) or folder.exists() else folder


def missing_folder_problem(option: str, path: str | os.PathLike[str]) -> str | None:
    """Why ``option path`` cannot be written before the command starts: its folder is missing
    (commands never create folders silently); None when the folder exists or could not be made."""
    folder = missing_folder(path)
    if folder is None or unwritable_reason(path) is not None:
        return None  # it exists, or it could not be created (/proc/x): the command's own check says why
    return (
        f"{option} {path}: the folder {folder} does not exist; create it first (mkdir -p {folder}) "
        "or give a path in an existing folder"
    )


def silence_stdout() -> int:
    """The reader of stdout went away: point stdout at the null device, so that the interpreter's
    last flush cannot fail again, and return the exit status of a process killed by SIGPIPE."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):  # a stdout without a file descriptor (in-process)
        pass
    return EXIT_BROKEN_PIPE
