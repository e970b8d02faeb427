"""Accuracy (or any per-epoch metric) curves from result records, as a PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from .core.errors import TrainingConfigError
from .table import read_record


def _label(record: dict) -> str:
    profile = record.get("profile") or {}
    label = record["method"] + (f" @ {profile['name']}" if profile else "")
    final = record.get("final", {})
    if "epsilon" in final:
        label += f" (eps {final['epsilon']:.3g})"
    elif "claimed_epsilon" in final:
        label += f" (claimed eps {final['claimed_epsilon']:.3g}, not a guarantee)"
    return label


def plot_records(paths: Sequence[str], out: str, *, metric: str = "test_accuracy", title: str | None = None) -> Path:
    """One curve per record of ``metric`` against epoch; alignment keys read as ``alignment.layer1``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for path in paths:
        record = read_record(Path(path))
        epochs = record.get("epochs", [])
        xs, ys = [], []
        for row in epochs:
            value = row
            for part in metric.split("."):
                value = value.get(part) if isinstance(value, dict) else None
            if isinstance(value, (int, float)):
                xs.append(row["epoch"])
                ys.append(value)
        if not xs:
            raise TrainingConfigError(f"{path}: no per-epoch {metric!r} values (keys: {sorted(epochs[0]) if epochs else []})")
        ax.plot(xs, ys, marker="o", label=_label(record))
    ax.set_xlabel("epoch")
    ax.set_ylabel(metric)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(target, dpi=120)
    plt.close(fig)
    return target
