"""A markdown table of result records (one row per run), for READMEs and notes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

COLUMNS = ("run", "method", "profile", "sigma / z", "epsilon", "test acc (%)", "epochs", "wall (s)")


def row(path: Path) -> list[str]:
    record = json.loads(path.read_text())
    final, hyper, privacy = record["final"], record["hyperparameters"], record.get("privacy") or {}
    noise = ""
    std_lower = privacy.get("std_lower_accounted", privacy.get("sigma_accounted"))  # older records
    if std_lower is not None:
        noise = f"sigma {std_lower:.3g}"
    elif privacy.get("noise_multiplier") is not None:
        noise = f"z {privacy['noise_multiplier']:.3g}"
    eps = f"{final['epsilon']:.3g}" if "epsilon" in final else "-"
    profile = (record.get("profile") or {}).get("name", "-")
    method = record["method"] + (" (ternarized)" if hyper.get("ternarize") else "")
    return [path.stem, method, profile, noise, eps, f"{100 * final['test_accuracy']:.2f}",
            str(final["epochs_completed"]), f"{final['wall_time_s']:.0f}"]


def markdown_table(paths: Sequence[str]) -> str:
    rows = [row(Path(p)) for p in paths]
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)
