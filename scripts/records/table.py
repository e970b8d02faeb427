"""The record tables from the records of scripts/records/*_rows.sh, as markdown.

    python -m scripts.records.table [results/records]

One row per (method, dataset, epsilon): the candidates tried, the pick (made on the validation
split), its validation and test accuracy, the pick run again, and the two runs on all 60 000
images with their mean. Every figure is read from a record; the search is not paid for (each
run's epsilon is its own).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from trainers.cli.best_by_validation import selection_key
from trainers.cli.table import read_record

SUFFIXES = ("-repeat", "-final-60k", "-final-60k-second")


def percent(record: dict | None, key: str = "test_accuracy") -> str:
    value = None if record is None else record["final"].get(key)
    return "-" if value is None else f"{100 * value:.2f}"


def row(folder: Path) -> str | None:
    """The table row of one epsilon's folder of records, or ``None`` when it has no candidate."""
    records = {path.stem: read_record(path) for path in sorted(folder.glob("*.json"))}
    candidates = {name: r for name, r in records.items() if not name.endswith(SUFFIXES)}
    if not candidates:
        return None
    pick = max(candidates, key=lambda name: selection_key(candidates[name]))  # the sweep's pick
    finals = [records.get(pick + suffix) for suffix in SUFFIXES[1:]]
    tests = [r["final"]["test_accuracy"] for r in finals if r is not None]
    mean = f"**{100 * statistics.mean(tests):.2f}**" if tests else "-"
    epsilon = max(r["final"]["epsilon"] for r in records.values())
    method, dataset = folder.parent.parent.name, folder.parent.name
    return (
        f"| {method} | {dataset} | {folder.name.removeprefix('eps')} ({epsilon:.3f}) | {len(candidates)} | {pick} | "
        f"{percent(candidates[pick], 'validation_accuracy')} / {percent(candidates[pick])} | "
        f"{percent(records.get(pick + '-repeat'))} | {' / '.join(percent(r) for r in finals)} | {mean} |"
    )


def table(root: Path) -> str:
    lines = [
        "| method | dataset | epsilon (largest spent) | candidates | pick | pick val / test (%) | run again | "
        "60 000 images (%) | their mean |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    folders = sorted(root.glob("*/*/eps*"), key=lambda f: (f.parent.parent.name, f.parent.name, float(f.name[3:])))
    lines += [line for folder in folders if (line := row(folder)) is not None]
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(Path(sys.argv[1] if len(sys.argv) > 1 else "results/records")))
