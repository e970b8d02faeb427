"""``python -m scripts.records.table``: one row per (method, dataset, epsilon), the pick made on the
validation split only, the repeat and the 60 000-image runs read from their own records."""

from __future__ import annotations

import json
from pathlib import Path

from scripts.records.table import table


def write(folder: Path, name: str, validation: float | None, test: float, epsilon: float = 3.0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    record = {
        "method": "dp-sgd",
        "hyperparameters": {"target_epsilon": epsilon},
        "final": {"validation_accuracy": validation, "test_accuracy": test, "epsilon": epsilon},
    }
    (folder / f"{name}.json").write_text(json.dumps(record))


def test_the_pick_is_made_on_validation_and_the_finals_are_averaged(tmp_path):
    folder = tmp_path / "dp-sgd" / "mnist" / "eps3"
    write(folder, "b8192-e30", validation=0.90, test=0.99)  # best test, worse validation: not the pick
    write(folder, "b8192-e40", validation=0.95, test=0.97)
    write(folder, "b8192-e40-repeat", validation=0.94, test=0.96)
    write(folder, "b8192-e40-final-60k", validation=None, test=0.98)
    write(folder, "b8192-e40-final-60k-second", validation=None, test=0.96)
    rows = table(tmp_path).splitlines()
    assert len(rows) == 3
    assert rows[2] == (
        "| dp-sgd | mnist | 3 (3.000) | 2 | b8192-e40 | 95.00 / 97.00 | 96.00 | 98.00 / 96.00 | **97.00** |"
    )


def test_rows_are_ordered_by_epsilon_and_a_missing_final_shows_a_dash(tmp_path):
    for epsilon in (8, 1):
        write(tmp_path / "dp-dfa" / "fashion-mnist" / f"eps{epsilon}", "e15", 0.8, 0.8, float(epsilon))
    rows = table(tmp_path).splitlines()[2:]
    assert [row.split(" | ")[2] for row in rows] == ["1 (1.000)", "8 (8.000)"]
    assert rows[0].endswith("| - | - / - | - |")
