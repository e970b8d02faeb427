"""Per-epoch curves from result records, as a picture: an accuracy on a fixed 0-100 % axis with the
chance level drawn, and the privacy spent per epoch on a panel below when the records have it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core.errors import TrainingConfigError
from .table import read_record

#: Axis labels, with units, of the per-epoch keys a record holds.
LABELS = {
    "test_accuracy": "test accuracy (%)",
    "validation_accuracy": "validation accuracy (%)",
    "train_accuracy": "training accuracy (%)",
    "train_loss": "training loss (cross-entropy, nats)",
    "test_loss": "test loss (cross-entropy, nats)",
    "validation_loss": "validation loss (cross-entropy, nats)",
    "epsilon": "epsilon spent",
    "claimed_epsilon": "claimed epsilon (not a guarantee)",
    "epoch_time_s": "epoch wall time (s)",
}
CHANCE_GID, EPSILON_AXES_GID = "chance", "epsilon"


def _label(record: dict) -> str:
    profile = record.get("profile") or {}
    label = record["method"] + (f" @ {profile['name']}" if profile else "")
    final = record.get("final", {})
    if "epsilon" in final:
        label += f" (eps {final['epsilon']:.3g})"
    elif "claimed_epsilon" in final:
        label += f" (claimed eps {final['claimed_epsilon']:.3g}, not a guarantee)"
    return label


def metric_label(metric: str) -> str:
    """Axis label of a per-epoch key; ``alignment.layer1`` reads as "alignment, layer1 (cosine)"."""
    if metric in LABELS:
        return LABELS[metric]
    if metric.startswith("alignment."):
        return f"gradient alignment, {metric.split('.', 1)[1]} (cosine)"
    return metric.replace("_", " ")


def is_accuracy(metric: str) -> bool:
    return metric.endswith("accuracy")


def per_epoch(record: dict, metric: str) -> tuple[list[float], list[float]]:
    """(epochs, values) of ``metric`` (dotted keys descend into dicts) where the record has a number."""
    xs, ys = [], []
    for row in record.get("epochs", []):
        value: Any = row
        for part in metric.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            xs.append(row["epoch"])
            ys.append(float(value))
    return xs, ys


def record_classes(record: dict, path: str) -> int:
    """Classes of the record's dataset: its ``dataset.n_classes``, or the count of a named dataset."""
    dataset = record.get("dataset") or {}
    from ..core.data import DECLARED_CLASSES  # torch-heavy: only when a record names no class count

    classes = dataset.get("n_classes") or DECLARED_CLASSES.get(dataset.get("name", ""))
    if not isinstance(classes, int) or classes < 2:
        raise TrainingConfigError(
            f"{path}: dataset {dataset.get('name')!r} has no known class count for the "
            f"chance line; give --classes N (N >= 2)"
        )
    return classes


def _chance_line(ax: Any, classes: set[int], scale: float) -> None:
    for n in sorted(classes):
        ax.axhline(
            scale / n,
            color="0.4",
            linestyle="--",
            linewidth=1,
            gid=CHANCE_GID,
            label=f"chance, 1/{n} classes ({scale / n:.3g}{' %' if scale == 100 else ''})",
        )


def plot_records(
    paths: Sequence[str],
    out: str,
    *,
    metric: str = "test_accuracy",
    title: str | None = None,
    n_classes: int | None = None,
) -> Path:
    """One curve per record of ``metric`` against epoch. An accuracy is drawn in % on 0-100 with the
    chance level ``1 / n_classes`` (default: from each record); records with a per-epoch epsilon
    get a second panel of the epsilon spent."""
    if n_classes is not None and not (isinstance(n_classes, int) and n_classes >= 2):
        raise TrainingConfigError(f"--classes must be an integer >= 2, got {n_classes!r}")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = [(path, read_record(Path(path)), f"C{i % 10}") for i, path in enumerate(paths)]  # one colour a run
    private = [(record, color) for _, record, color in records if per_epoch(record, "epsilon")[0]]
    fig, axes = plt.subplots(
        2 if private else 1,
        1,
        figsize=(7, 7 if private else 4.5),
        sharex=True,
        squeeze=False,
        gridspec_kw={"height_ratios": [2, 1]} if private else None,
    )
    ax = axes[0, 0]
    scale = 100.0 if is_accuracy(metric) else 1.0
    classes = set()
    for path, record, color in records:
        xs, ys = per_epoch(record, metric)
        if not xs:
            epochs = record.get("epochs", [])
            raise TrainingConfigError(
                f"{path}: no per-epoch {metric!r} values (keys: {sorted(epochs[0]) if epochs else []})"
            )
        ax.plot(xs, [scale * y for y in ys], marker="o", color=color, label=_label(record))
        if is_accuracy(metric):
            classes.add(n_classes or record_classes(record, path))
    if is_accuracy(metric):
        _chance_line(ax, classes, scale)
        ax.set_ylim(0, 100)
    ax.set_ylabel(metric_label(metric))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if private:
        _epsilon_panel(axes[1, 0], private)
    from matplotlib.ticker import MaxNLocator

    axes[-1, 0].xaxis.set_major_locator(MaxNLocator(integer=True))  # whole epochs
    axes[-1, 0].set_xlabel("epoch")
    if title:
        ax.set_title(title)
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(target, dpi=120)
    plt.close(fig)
    return target


def _epsilon_panel(ax: Any, records: list[tuple[dict, str]]) -> None:
    """Epsilon spent at the end of each epoch, one line per private record (in its accuracy's colour)."""
    ax.set_gid(EPSILON_AXES_GID)
    for record, color in records:
        xs, ys = per_epoch(record, "epsilon")
        delta = (record.get("final") or {}).get("delta")
        ax.plot(xs, ys, marker="o", color=color, label=_label(record) + (f", delta {delta:g}" if delta else ""))
    ax.set_ylabel(LABELS["epsilon"])
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
