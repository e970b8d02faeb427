"""Nothing spent outside a ledger when a disk fills or a folder is read-only.

- Before the first draw, every output path is probed (a file can be created there) and its file
  system is checked for room: two checkpoints (the atomic write keeps the old file until the new
  one is complete) and a margin for the journal and the record.
- A checkpoint is written before the first draw (the loop's), so a checkpoint write that fails
  after noise was drawn stops the run with every draw in the journal (each line fsynced before its
  draw, and counted in the lock) beside a checkpoint ``--resume`` accepts; the message says so,
  with the epsilon spent.
- A finished record that ``--out`` cannot take is written to a fallback path, said where; if no
  path takes it, it is printed, with the epsilon.
"""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from opu_hal.runtime.paths import unwritable_reason

from ..core.errors import OutputWriteError
from .output import write_json

#: Room left beyond two checkpoints: the journal's lines, the lock and the result record.
MARGIN_BYTES = 1 << 20

#: A :class:`trainers.run.loop.Trainer` (read by attribute: the loop imports this module).
Trainer = Any


def free_bytes(path: str | os.PathLike[str]) -> int | None:
    """Bytes an unprivileged writer may still use on the file system that would hold ``path``."""
    folder = Path(path).parent if str(Path(path).parent) else Path(".")
    existing = next((p for p in [folder, *folder.parents] if p.exists()), None)
    if existing is None:
        return None
    try:
        stats = os.statvfs(existing)
    except OSError:
        return None
    return stats.f_bavail * stats.f_frsize


def check_room(path: str | os.PathLike[str], needed: int, option: str) -> None:
    """Refuse, naming ``option``, a path that cannot be created or whose file system lacks ``needed`` bytes."""
    reason = unwritable_reason(path)
    if reason is not None:
        raise OutputWriteError(f"{option} {path}: {reason}; nothing was drawn")
    free = free_bytes(path)
    if free is not None and free < needed:
        raise OutputWriteError(
            f"{option} {path}: {free} bytes free on its file system, {needed} needed (two checkpoints, the journal "
            "and the record); free space or choose another folder; nothing was drawn"
        )


def state_bytes(state: dict[str, Any]) -> int:
    """The size of a checkpoint holding ``state`` (its payload; the header is a few dozen bytes)."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getbuffer().nbytes


def probe_outputs(trainer: Trainer, state: Callable[[], dict[str, Any]], out: str | None) -> None:
    """Before the first draw: each output of rank 0 can be written and has room."""
    if not trainer.ranks.is_main:
        return
    checkpoint = trainer.config.checkpoint
    if checkpoint:
        needed = 2 * state_bytes(state()) + MARGIN_BYTES
        for path in (checkpoint, f"{checkpoint}.journal"):
            check_room(path, needed, "--checkpoint")
    if out is not None:
        check_room(out, MARGIN_BYTES, "--out")


def spent_line(trainer: Trainer) -> str:
    """The exact epsilon spent so far, as a sentence (empty for a run without an accountant)."""
    if trainer.accountant is None:
        return ""
    delta = trainer.config.delta
    return f"; privacy spent so far: epsilon {trainer.accountant.get_epsilon(delta)!r} at delta {delta!r}"


def unsaved_checkpoint(trainer: Trainer, exc: OSError) -> OutputWriteError:
    """The error of a checkpoint write that failed: where the draws so far are recorded."""
    journal = trainer.run_journal
    where = (
        f"they are recorded in {journal.journal.path} ({journal.lines} line(s), counted in {journal.lock.path}) "
        "beside the checkpoint written before the first draw; free space, then run again with --resume, which "
        "charges them (device noise) or replays them bit for bit (software noise)"
        if journal.journal is not None and journal.lock is not None
        else "no journal records them"
    )
    return OutputWriteError(
        f"--checkpoint {trainer.config.checkpoint}: cannot be written ({exc.strerror or exc}) after "
        f"{trainer.global_step} private step(s); {where}{spent_line(trainer)}"
    )


def fallback_paths(out: str | os.PathLike[str]) -> list[Path]:
    """Where a record goes when ``out`` cannot take it: the working folder, the temporary folder, home."""
    name = f"{Path(out).stem or 'record'}.{os.getpid()}.fallback.json"
    return [Path.cwd() / name, Path(tempfile.gettempdir()) / name, Path.home() / name]


def write_record(out: str | os.PathLike[str], record: dict[str, Any], log: Callable[[str], None]) -> Path | None:
    """Write ``record`` to ``out``, else to the first fallback that takes it (said in ``log``); print
    it on stderr when none does. Returns the path written (None when printed)."""
    try:
        write_json(out, record)
        return Path(out)
    except OSError as exc:
        failure = f"--out {out}: cannot be written ({exc.strerror or exc})"
    for path in fallback_paths(out):
        try:
            write_json(path, record)
        except OSError:
            continue
        log(f"{failure}; the record is at {path}")
        return path
    final = record.get("final", {})
    spent = f"; epsilon {final['epsilon']!r} at delta {final.get('delta')!r}" if "epsilon" in final else ""
    log(f"{failure}, nor at {', '.join(map(str, fallback_paths(out)))}; the record follows on stderr{spent}")
    print(json.dumps(record, indent=2), file=sys.stderr, flush=True)
    return None
