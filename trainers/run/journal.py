"""The privacy-critical bookkeeping of a run, in one file: the lock, the step journal, atomic
integrity-checked checkpoints, what a resumed run charges, and the budget check before each step.

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
refused rather than guessed at. :class:`RunJournal` is all of this for one run; the loop calls
:meth:`RunJournal.begin` before each private step and :meth:`RunJournal.drawn` once it is charged.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from opu_hal.privacy import Accountant, Event, PrivacyBudget

from ..core.errors import CheckpointError
from .output import write_all, write_atomic

FORMAT = 4  # 3: every part saved by its state_dict (the accountant's ledger as data); 4: + lr schedule, weight average
MAGIC = f"OPU-HAL CHECKPOINT {FORMAT}\n".encode()
#: The magic line written before it named the payload's format (its payloads are format 4): still read.
MISNAMED_MAGIC = b"OPU-HAL CHECKPOINT 3\n"


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
    if not data.startswith((MAGIC, MISNAMED_MAGIC)) or len(data) < header or data[header - 1 : header] != b"\n":
        raise CheckpointError(f"{target}: not an opu-hal checkpoint of format {FORMAT}")
    digest, payload = data[len(MAGIC) : header - 1].decode("ascii", "replace"), data[header:]
    if hashlib.sha256(payload).hexdigest() != digest:
        raise CheckpointError(
            f"{target}: checkpoint is corrupted (its sha256 does not match its content); "
            "restore it from a copy or start a new run"
        )
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
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            write_all(fd, f"{global_step}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)

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
                    "is corrupt: the privacy spent cannot be known, so the run is not resumed"
                )
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
    """An exclusive lock on ``<checkpoint>.lock``: two processes never train on one checkpoint. The
    file also holds the count of journal lines written (``draws N``, fsynced with each line), so a
    journal whose last lines were removed is still charged for them."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._handle: Any = None

    def acquire(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle = os.fdopen(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644), "r+")  # held until release()
        except OSError as exc:
            raise CheckpointError(
                f"--checkpoint: cannot create the lock {self.path} ({exc.strerror or exc}); give a --checkpoint "
                "path in a writable folder (nothing was drawn)"
            ) from None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise CheckpointError(f"{self.path}: another process is training on this checkpoint") from None
        self._handle = handle

    def record_draws(self, count: int) -> None:
        """Durably replace the count of journal lines written (the lock must be held)."""
        if self._handle is not None:
            fd = self._handle.fileno()
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"draws {count}\n".encode(), 0)
            os.fsync(fd)

    def recorded_draws(self) -> int:
        """The count :meth:`record_draws` last wrote (0 for an empty lock, as written before the count)."""
        text = self.path.read_text(encoding="ascii", errors="replace").strip() if self.path.is_file() else ""
        number = text.removeprefix("draws ")
        if not text:
            return 0
        if not (text.startswith("draws ") and number.isdigit()):
            raise CheckpointError(f"{self.path}: holds {text[:40]!r}, not a draw count; the privacy spent is unknown")
        return int(number)

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None


class RunJournal:
    """Lock, journal and checkpoint of one run (all inactive without a checkpoint path), and the
    count of journal lines the ledger has charged (``charged_lines``) and of steps charged on
    resume because their outputs were lost (``lost_steps_charged``)."""

    def __init__(self, checkpoint: str | os.PathLike[str] | None) -> None:
        self.checkpoint = Path(checkpoint) if checkpoint else None
        self.journal = StepJournal(f"{checkpoint}.journal") if checkpoint else None
        self.lock = RunLock(f"{checkpoint}.lock") if checkpoint else None
        self.charged_lines = 0
        self.lost_steps_charged = 0
        #: Journal lines written so far (the count the lock keeps).
        self.lines = 0

    def acquire(self) -> None:
        if self.lock is not None:
            self.lock.acquire()

    def release(self) -> None:
        if self.lock is not None:
            self.lock.release()

    def refuse_overwriting(self) -> None:
        """Refuse to start a new run where one is recorded (its spend would be forgotten)."""
        if self.checkpoint is None or self.journal is None:
            return
        if self.checkpoint.exists() or self.journal.exists():
            raise CheckpointError(
                f"--checkpoint {self.checkpoint}: a run is already recorded there (checkpoint or journal). Pass "
                f"--resume to continue it, or delete {self.checkpoint} and {self.journal.path} to start over (the "
                "privacy that run spent is then no longer counted by opu-hal)"
            )
        if self.lock is not None:
            self.lock.record_draws(0)  # a new run: a count left by a deleted run is not this run's

    # -- each private step ----------------------------------------------------------------------
    def begin(self, global_step: int) -> None:
        """Before a step draws noise: its line is durable first."""
        if self.journal is not None and self.lock is not None:
            try:
                self.journal.begin(global_step)
                self.lines += 1
                self.lock.record_draws(self.lines)
            except OSError as exc:
                raise CheckpointError(
                    f"--checkpoint: cannot write the journal {self.journal.path} or its count in {self.lock.path} "
                    f"({exc.strerror or exc}); step {global_step} did not draw. Free space, then --resume"
                ) from None

    def drawn(self) -> None:
        """After the step's release is charged to the ledger."""
        if self.journal is not None:
            self.charged_lines += 1

    # -- checkpoints ----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, int]:
        return {"charged_lines": self.charged_lines, "lost_steps_charged": self.lost_steps_charged}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.charged_lines = int(state["charged_lines"])
        self.lost_steps_charged = int(state["lost_steps_charged"])

    def save(self, state: dict[str, Any]) -> None:
        """Write ``state`` (each part a ``state_dict``) and this journal's counts atomically."""
        if self.checkpoint is not None:
            save_checkpoint(self.checkpoint, {**state, "journal": self.state_dict()})

    def load(self) -> dict[str, Any]:
        """The checkpoint's state; this journal's counts restored from it."""
        if self.checkpoint is None:
            raise CheckpointError("--resume needs --checkpoint")
        state = load_checkpoint(self.checkpoint)
        self.load_state_dict(state["journal"])
        return state

    def reconcile(
        self,
        planned_steps: int,
        replayable: bool,
        charge: Callable[[int], None],
        save: Callable[[], None],
        log: Callable[[str], None],
    ) -> None:
        """On resume, after the checkpoint's state is restored: account for the steps the journal
        records beyond those the checkpoint charged. Device noise (not ``replayable``) was released
        and cannot be drawn again: ``charge`` them once, now, and ``save`` before anything is drawn.
        Software noise is replayed bit for bit by the restored generator (nothing new released)."""
        assert self.journal is not None and self.lock is not None
        written = self.journal.draws(max(planned_steps, 1))
        counted = self.lock.recorded_draws()
        if written < self.charged_lines:  # lines the checkpoint saw are gone: the journal was tampered with
            raise CheckpointError(
                f"--resume: {self.journal.path} records {written} private step(s) but the checkpoint has charged "
                f"{self.charged_lines}: the journal was truncated or deleted, so the privacy spent is unknown; "
                "the run is not resumed"
            )
        lines = max(written, counted)  # lines removed after the checkpoint are still counted by the lock
        if counted > written:
            log(f"resume: {self.journal.path} holds {written} line(s) but {self.lock.path} counted {counted}: charged")
        self.journal.seal()
        self.lines = lines
        self.lock.record_draws(lines)
        extra = lines - self.charged_lines
        if not extra:
            return
        self.charged_lines = lines
        if not replayable:
            charge(extra)
            self.lost_steps_charged += extra
            save()
            log(f"resume: charged {extra} step(s) that drew device noise after the checkpoint")
        else:
            log(f"resume: replaying {extra} step(s) after the checkpoint with the restored generator")


def charge_planned(accountant: Accountant | None, event: Event | None, count: int) -> None:
    """Charge ``count`` steps whose outputs were lost at the planned ``event``."""
    if accountant is not None and event is not None:
        accountant.step(event, count)


def budget_allows(budget: PrivacyBudget | None, accountant: Accountant | None, event: Event | None) -> bool:
    """Whether one more step at the planned ``event`` keeps epsilon within the budget."""
    if budget is None or accountant is None or event is None:
        return True
    return budget.allows(accountant, event)
