"""The figures ``opu-hal plan --profile ... --plot`` writes, one per mechanism: what each calibrated
operating point supplies against what the target needs, and its camera time (``gaussian``,
``skellam``); epsilon against reads per count (``digitized``). The lattice mechanism's trade-off
over the resolution is :func:`.camera_plan.plot_trade_off`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .plan import OperatingPlan

NEEDED_GID, TARGET_GID = "needed", "target"


def _figure(panels: int) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(1, panels, figsize=(5.2 * panels, 4.2), squeeze=False)


def _save(figure: Any, path: str | Path) -> None:
    import matplotlib.pyplot as plt

    figure.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _by_exposure(plans: Sequence[OperatingPlan]) -> dict[float, list[OperatingPlan]]:
    groups: dict[float, list[OperatingPlan]] = defaultdict(list)
    for p in sorted(plans, key=lambda p: p.temperature_c):
        groups[p.exposure_us].append(p)
    return dict(groups)


def _supplied_panel(ax: Any, plans: Sequence[OperatingPlan], mechanism: str) -> None:
    """Gaussian: ``std_lower`` per point against the std the target needs; skellam: reads per count."""
    for i, (exposure, group) in enumerate(_by_exposure(plans).items()):
        temps = [p.temperature_c for p in group]
        values = [p.supplied if mechanism == "gaussian" else p.reads_per_value for p in group]
        ax.plot(temps, values, "o-", color=f"C{i}", label=f"{exposure:g} us exposure")
        reached = [(t, v) for t, v, p in zip(temps, values, group) if p.reaches_target]
        if reached:
            ax.plot(*zip(*reached), "o", color=f"C{i}", markersize=11, markerfacecolor="none")
    if mechanism == "gaussian":
        needed = plans[0].needed
        ax.axhline(
            needed,
            color="k",
            linestyle="--",
            gid=NEEDED_GID,
            label=f"needed: z x sensitivity = {needed:.4g} (circled: reaches)",
        )
        ax.set_ylabel("noise std_lower supplied (output units)")
        ax.set_ylim(bottom=0)
        ax.set_title("accounted noise per projection", fontsize=10)
    else:
        ax.set_ylabel("anchor-only reads per count")
        ax.set_ylim(bottom=0)
        ax.set_title(f"reads for a Poisson mean of {plans[0].needed:.4g} e- per count (circled: reaches)", fontsize=9)
    ax.set_xlabel("sensor temperature (C)")
    ax.legend(fontsize=7.5)


def _time_panel(ax: Any, plans: Sequence[OperatingPlan]) -> None:
    """Camera time of the whole run at each operating point."""
    for i, (exposure, group) in enumerate(_by_exposure(plans).items()):
        ax.plot(
            [p.temperature_c for p in group],
            [max(p.time_s, 1e-12) for p in group],
            "s-",
            color=f"C{i}",
            label=f"{exposure:g} us exposure",
        )
    ax.set_yscale("log")
    ax.set_xlabel("sensor temperature (C)")
    ax.set_ylabel("camera time for the run (s)")
    ax.set_title("cost", fontsize=10)
    ax.legend(fontsize=7.5)


def plot_operating_points(plans: Sequence[OperatingPlan], mechanism: str, title: str, path: str | Path) -> None:
    """Supplied against needed, and the run's camera time, at every calibrated operating point."""
    figure, axes = _figure(2)
    _supplied_panel(axes[0, 0], plans, mechanism)
    _time_panel(axes[0, 1], plans)
    figure.suptitle(title, fontsize=9)
    _save(figure, path)


def plot_digitized(
    trace: Sequence[tuple[int, float]],
    target_epsilon: float,
    delta: float,
    found: tuple[int, float] | None,
    title: str,
    path: str | Path,
) -> None:
    """Epsilon of the run against reads per count (the planner's evaluations), the target and the answer."""
    figure, axes = _figure(1)
    ax = axes[0, 0]
    points = sorted(dict(trace).items())
    ax.plot([r for r, _ in points], [e for _, e in points], "o-", color="C0", label="epsilon of the run (accountant)")
    ax.axhline(target_epsilon, color="k", linestyle="--", gid=TARGET_GID, label=f"target epsilon {target_epsilon:g}")
    if found is not None:
        ax.plot(
            [found[0]],
            [found[1]],
            "*",
            color="C3",
            markersize=14,
            label=f"fewest reads: {found[0]} (epsilon {found[1]:.4g})",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    from matplotlib.ticker import FuncFormatter

    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    ax.set_xlabel("reads per count")
    ax.set_ylabel(f"epsilon at delta = {delta:g}")
    ax.legend(fontsize=7.5)
    ax.set_title(title, fontsize=8.5)
    _save(figure, path)
