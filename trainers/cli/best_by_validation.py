"""The best run per (method, target epsilon) picked on validation accuracy, as a markdown table.

    python -m trainers.cli.best_by_validation RECORD.json [...]
    python -m trainers.cli.best_by_validation --name RECORD.json [...]   # the best record's file stem

The pick reads only the validation split (never the test split), so the test accuracy printed is
not selected on; the validation split is held out of every run's training data. Equal validation
accuracies (a count of 6 000 images ties easily) go to the lower validation loss of the last epoch,
then to the earlier record given: :func:`selection_key`, which the record tables use too.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from .table import read_record

SETTINGS = (
    "model",
    "hidden",
    "conv_strides",
    "head_hidden",
    "batch_size",
    "epochs",
    "optimizer",
    "lr",
    "lr_schedule",
    "weight_average",
    "sampling",
    "clip_norm",
    "tau_h",
    "tau_e",
    "features",
)
OPTIONAL = ("conv_strides", "head_hidden", "lr_schedule", "weight_average", "sampling")  # shown only when set


def selection_key(record: dict) -> tuple[float, float]:
    """What a pick maximises: the validation accuracy, then minus the last epoch's validation loss (a
    record without it ranks last among its ties)."""
    epochs = record.get("epochs") or [{}]
    loss = epochs[-1].get("validation_loss")
    return record["final"]["validation_accuracy"], -loss if loss is not None else float("-inf")


def best_by_validation(records: Sequence[dict]) -> list[dict]:
    """One record per (method, target epsilon): the highest :func:`selection_key`."""
    best: dict[tuple[str, float | None], dict] = {}
    for record in records:
        key = (record["method"], record["hyperparameters"].get("target_epsilon"))
        if key not in best or selection_key(record) > selection_key(best[key]):
            best[key] = record
    return [best[key] for key in sorted(best, key=lambda k: (k[1] or 0, k[0]))]


def markdown(records: Sequence[dict], tried: dict[tuple[str, float | None], int]) -> str:
    lines = [
        "| method | epsilon | runs tried | val acc (%) | test acc (%) | settings |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in records:
        h, f = r["hyperparameters"], r["final"]
        settings = ", ".join(
            f"{k} {h[k]}" for k in SETTINGS if k in h and ((h[k] and h[k] != "constant") or k not in OPTIONAL)
        )
        lines.append(
            f"| {r['method']} | {f.get('epsilon', float('nan')):.3g} | "
            f"{tried[(r['method'], h.get('target_epsilon'))]} | {100 * f['validation_accuracy']:.2f} | "
            f"{100 * f['test_accuracy']:.2f} | {settings} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    arguments = list(sys.argv[1:] if argv is None else argv)
    name_only = "--name" in arguments
    paths = [Path(p) for p in arguments if p != "--name"]
    records = [read_record(p) for p in paths]
    if name_only:
        best = best_by_validation(records)
        if len(best) != 1:
            raise SystemExit(f"--name needs records of one method and epsilon, got {len(best)} groups")
        print(paths[records.index(best[0])].stem)
        return
    tried: dict[tuple[str, float | None], int] = {}
    for r in records:
        key = (r["method"], r["hyperparameters"].get("target_epsilon"))
        tried[key] = tried.get(key, 0) + 1
    print(markdown(best_by_validation(records), tried))


if __name__ == "__main__":
    main()
