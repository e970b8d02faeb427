"""Atomic, integrity-checked training checkpoints and the step journal that keeps a killed run's
privacy spend.

A checkpoint holds the model, the optimizer, the method's state (including the SECRET state of the
privacy-noise generator: a checkpoint must be kept as private as the training data), the
accountant's ledger, the position, the record so far, and how many journal lines its ledger has
charged. The file is ``MAGIC, sha256 of the payload, payload``; a file whose hash does not match is
refused.

Before each private step the loop appends the step number to ``<checkpoint>.journal`` (flushed and
fsynced). Every line is one draw of privacy noise. On resume, the lines beyond those the checkpoint
charged were steps that ran after it: their noise was released, so a device-noise run (which
cannot draw the same noise again) charges them at once and writes a new checkpoint before drawing
anything; a software-noise run restores its generator and replays them bit for bit, which releases
nothing new. A journal shorter than the checkpoint says, missing, or with a malformed line is
refused rather than guessed at.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
from pathlib import Path
from typing import Any

import torch

from .core.errors import CheckpointError
from .records import write_atomic

FORMAT = 2
MAGIC = b"OPU-HAL CHECKPOINT 2\n"


def save_checkpoint(path: str | os.PathLike[str], state: dict[str, Any]) -> None:
    buffer = io.BytesIO()
    torch.save({"format": FORMAT, **state}, buffer)
    payload = buffer.getvalue()
    write_atomic(path, MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    target = Path(path)
    if not target.is_file():
        raise CheckpointError(f"--resume: no checkpoint at {target} (was --checkpoint the same path?)")
    data = target.read_bytes()
    header = len(MAGIC) + 65
    if not data.startswith(MAGIC) or len(data) < header or data[header - 1:header] != b"\n":
        raise CheckpointError(f"{target}: not an opu-hal checkpoint of format {FORMAT}")
    digest, payload = data[len(MAGIC):header - 1].decode("ascii", "replace"), data[header:]
    if hashlib.sha256(payload).hexdigest() != digest:
        raise CheckpointError(f"{target}: checkpoint is corrupted (its sha256 does not match its content); "
                              "restore it from a copy or start a new run")
    try:
        state = torch.load(io.BytesIO(payload), map_location="cpu", weights_only=False)
    except Exception as exc:  # a hash-valid file that torch cannot read
        raise CheckpointError(f"{target}: not a readable opu-hal checkpoint ({exc})") from exc
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{target}: not an opu-hal checkpoint of format {FORMAT}")
    return state


TORN = "torn"  # a journal line whose write was damaged: counted as one draw


class StepJournal:
    """Append-only record of the private steps begun, one line per draw, durable before the draw."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def begin(self, global_step: int) -> None:
        with open(self.path, "a", encoding="ascii") as handle:
            handle.write(f"{global_step}\n")
            handle.flush()
            os.fsync(handle.fileno())

    def draws(self, max_step: int) -> int:
        """How many private steps may have drawn noise: one per complete line, plus one for a
        non-empty last line without its newline. Such a line is torn or damaged (cut short, or its
        newline flipped): its step may have drawn before the damage, so it is charged, never
        dropped (issue 27). Any other malformed line, or a step outside ``[0, max_step)``, is refused."""
        if not self.path.is_file():
            return 0
        text = self.path.read_text(encoding="ascii", errors="replace")
        lines = text.split("\n")
        complete, last = lines[:-1], lines[-1]
        for number, line in enumerate(complete, start=1):
            if line != TORN and (not line.isdigit() or int(line) >= max_step):
                raise CheckpointError(
                    f"{self.path}: line {number} is {line[:40]!r}, not a step in [0, {max_step}); the journal "
                    "is corrupt: the privacy spent cannot be known, so the run is not resumed")
        return len(complete) + (last != "")

    def seal(self) -> None:
        """Replace a damaged last line by ``torn`` (still one draw), so the next line starts clean."""
        if not self.path.is_file():
            return
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end == len(data):
            return
        with open(self.path, "r+b") as handle:
            handle.truncate(end)
            handle.seek(end)
            handle.write(f"{TORN}\n".encode())
            handle.flush()
            os.fsync(handle.fileno())

    def exists(self) -> bool:
        return self.path.is_file()


class RunLock:
    """An exclusive lock on ``<checkpoint>.lock``: two processes never train on one checkpoint."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._handle: Any = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise CheckpointError(f"{self.path}: another process is training on this checkpoint") from None
        self._handle = handle

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None
