"""A markdown table of result records (one row per run), for READMEs and notes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ..core.errors import TrainingConfigError

COLUMNS = ("run", "method", "profile", "sigma / z", "epsilon", "test acc (%)", "epochs", "wall (s)")


MAX_RECORD_BYTES = 64 * 2**20


def read_record(path: Path) -> dict:
    """A result record written by ``train --out``, or :class:`TrainingConfigError` naming the file."""
    try:
        if path.stat().st_size > MAX_RECORD_BYTES:
            raise TrainingConfigError(f"{path}: larger than {MAX_RECORD_BYTES} bytes; not a result record")
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TrainingConfigError(f"{path}: not a readable result record ({exc})") from None
    if not (
        isinstance(record, dict)
        and isinstance(record.get("final"), dict)
        and isinstance(record.get("hyperparameters"), dict)
        and "method" in record
    ):
        raise TrainingConfigError(
            f"{path}: not a result record of `opu-hal train --out` (needs keys 'method', 'final', 'hyperparameters')"
        )
    return record


def row(path: Path) -> list[str]:
    record = read_record(path)
    final, hyper, privacy = record["final"], record["hyperparameters"], record.get("privacy") or {}
    noise = ""
    std_lower = privacy.get("std_lower_accounted", privacy.get("sigma_accounted"))  # older records
    if std_lower is not None:
        noise = f"sigma {std_lower:.3g}"
    elif privacy.get("noise_multiplier") is not None:
        noise = f"z {privacy['noise_multiplier']:.3g}"
    eps = (
        f"{final['epsilon']:.3g}"
        if "epsilon" in final
        else f"{final['claimed_epsilon']:.3g} (claim)"
        if "claimed_epsilon" in final
        else "-"
    )
    profile = (record.get("profile") or {}).get("name", "-")
    method = record["method"] + (" (ternarized)" if hyper.get("ternarize") else "")
    return [
        path.stem,
        method,
        profile,
        noise,
        eps,
        f"{100 * final['test_accuracy']:.2f}",
        str(final["epochs_completed"]),
        f"{final['wall_time_s']:.0f}",
    ]


def _rows(paths: Sequence[str]) -> list[list[str]]:
    try:
        return [row(Path(p)) for p in paths]
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, TrainingConfigError):
            raise
        raise TrainingConfigError(f"a record lacks a field the table needs ({exc!r})") from None


def table_rows(paths: Sequence[str]) -> list[dict[str, str]]:
    """The table's rows as dicts keyed by :data:`COLUMNS` (``opu-hal table --json``)."""
    return [dict(zip(COLUMNS, r)) for r in _rows(paths)]


def markdown_table(paths: Sequence[str]) -> str:
    rows = _rows(paths)
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)
