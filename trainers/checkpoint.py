"""Atomic training checkpoints and the step journal that keeps a killed run's privacy spend.

A checkpoint holds the model, the optimizer, the method's state, the accountant's ledger, the
position (epoch, step) and the record so far. Before each private step the loop appends the step
number to ``<checkpoint>.journal`` (flushed and fsynced), so after a kill the resumed run knows
which steps ran after the last checkpoint: replayable steps (software noise drawn from a
per-step seed, batches from a per-step seed) are recomputed bit for bit and cost nothing more;
steps whose noise came from a physical device cannot be replayed and are charged again.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import torch

from .errors import CheckpointError
from .records import write_atomic

FORMAT = 1


def save_checkpoint(path: str | os.PathLike[str], state: dict[str, Any]) -> None:
    buffer = io.BytesIO()
    torch.save({"format": FORMAT, **state}, buffer)
    write_atomic(path, buffer.getvalue())


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    target = Path(path)
    if not target.is_file():
        raise CheckpointError(f"--resume: no checkpoint at {target} (was --checkpoint the same path?)")
    try:
        state = torch.load(target, map_location="cpu", weights_only=False)
    except Exception as exc:  # a truncated or foreign file
        raise CheckpointError(f"{target}: not a readable opu-hal checkpoint ({exc})") from exc
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{target}: not an opu-hal checkpoint of format {FORMAT}")
    return state


class StepJournal:
    """Append-only record of the private steps begun, one line per step, durable before the step."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def begin(self, global_step: int) -> None:
        with open(self.path, "a", encoding="ascii") as handle:
            handle.write(f"{global_step}\n")
            handle.flush()
            os.fsync(handle.fileno())

    def last_step(self) -> int | None:
        """The highest step begun, or ``None``; a torn last line is ignored."""
        if not self.path.is_file():
            return None
        steps = [int(line) for line in self.path.read_text(encoding="ascii").split("\n") if line.strip().isdigit()]
        return max(steps) if steps else None

    def reset(self) -> None:
        self.path.unlink(missing_ok=True)
