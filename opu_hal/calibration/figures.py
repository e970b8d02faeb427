"""The calibration figure ``opu-hal calibrate`` writes: one quantity per panel, with its unit and
its interval named; a calibration at a single temperature is drawn as a table, not as a curve."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..privacy.run_shape import RunShape, run_description
from .schema import Calibration


def _plain_ticks(axis: Any) -> None:
    """Tick labels as plain numbers (0.5, 20, 1000), not as powers like 6x10^-1."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))


def epsilons(reports: list, shape: RunShape, delta: float) -> tuple[list[float], int]:
    """Epsilon of the described run at each report's ``std_lower`` (the accountant's bound)."""
    from ..privacy.accountant import Accountant

    event_for, neighboring, steps = run_description(shape)
    found = []
    for report in reports:
        accountant = Accountant(neighboring)
        accountant.step(event_for(report.std_lower / shape.sensitivity), steps)
        found.append(accountant.get_epsilon(delta))
    return found, steps


def _table(ax: Any, cal: Calibration, reports: list, eps: list[float] | None, delta: float) -> None:
    """One temperature: the measured quantities as rows (value, interval, unit)."""
    rate = cal.dark_current[0].rate_e_per_s if cal.dark_current else None
    report = reports[0]
    level = report.details.get("bound_level", 0.9)
    rows = [["sensor temperature", f"{cal.temperatures_c[0]:g}", "", "C"],
            ["exposure", f"{cal.exposures_us[0]:g}", "", "us"]]
    if rate is not None:
        rows.append(["dark current", f"{rate.value:.4g}", f"[{rate.lower:.4g}, {rate.upper:.4g}] "
                     f"({rate.level:.0%} {rate.method})", "e-/s per pixel"])
    for name, est in (("conversion gain", cal.gain_e_per_dn), ("read noise", cal.read_noise_e)):
        rows.append([name, f"{est.value:.4g}", f"[{est.lower:.4g}, {est.upper:.4g}] ({est.level:.0%} {est.method})",
                     est.unit])
    rows.append(["noise std (typical input)", f"{report.std:.4g}", "", "output units"])
    rows.append(["noise std_lower (any input)", f"{report.std_lower:.4g}", f"{level:.0%} lower bound", "output units"])
    if eps is not None:
        rows.append([f"epsilon at delta {delta:g}", f"{eps[0]:.4g}", "at std_lower", ""])
    import textwrap

    rows = [[row[0], row[1], textwrap.fill(row[2], 60), row[3]] for row in rows]
    ax.axis("off")
    table = ax.table(cellText=rows, colLabels=["quantity", "value", "interval", "unit"], loc="center",
                     cellLoc="left", colLoc="left", colWidths=[0.25, 0.1, 0.5, 0.15])
    table.auto_set_font_size(False)
    table.set_fontsize(9)
    for (r, _), cell in table.get_celld().items():  # a wrapped interval gets a taller row
        lines = 1 + (rows[r - 1][2].count("\n") if r >= 1 else 0)
        cell.set_height(cell.get_height() * (1.0 + 0.8 * (lines - 1)) * 1.35)
    ax.set_title(f"{cal.device.profile}: calibration at one temperature", fontsize=10)


def plot_calibration(cal: Calibration, profile, path: Path, shape: RunShape | None, delta: float) -> None:
    """Dark current, output noise and (with a described run) epsilon against sensor temperature,
    one panel each; a single-temperature calibration is drawn as a table of the same quantities."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .calibrated import CalibratedNoise

    model = CalibratedNoise(cal, path, profile.mode, cal.exposures_us[0], profile.laser_power_uw,
                            profile.anchor_power_uw)
    temps = cal.temperatures_c
    reports = [model.report(t) for t in temps]
    eps, steps = epsilons(reports, shape, delta) if shape is not None else (None, 0)
    if len(temps) == 1:
        fig, ax = plt.subplots(figsize=(10.5, 0.5 + 0.32 * (8 + (eps is not None))))
        _table(ax, cal, reports, eps, delta)
        _save(fig, path)
        return
    panels = 3 if eps is not None else 2
    fig, axes = plt.subplots(1, panels, figsize=(4.3 * panels, 3.7))
    ax = axes[0]
    rates = [d.rate_e_per_s for d in cal.dark_current]
    rate_temps = [d.temperature_c for d in cal.dark_current]
    if rates:
        ax.errorbar(rate_temps, [r.value for r in rates], yerr=[[r.value - r.lower for r in rates],
                    [r.upper - r.value for r in rates]], fmt="o", color="C3", capsize=3, markersize=4,
                    label=f"estimate with its {rates[0].level:.0%} interval\n({rates[0].method}; widest "
                          f"+-{max((r.upper - r.lower) / 2 / r.value for r in rates):.1%})")
        ax.set_yscale("log")
        _plain_ticks(ax.yaxis)
        ax.legend(fontsize=7.5, loc="lower right")
    ax.set_xlabel("sensor temperature (C)")
    ax.set_ylabel("dark current (e-/s per pixel)")
    ax.set_title("dark current", fontsize=10)

    ax = axes[1]
    level = reports[0].details.get("bound_level", 0.9)
    ax.plot(temps, [r.std for r in reports], "o-", color="C0", markersize=8, markerfacecolor="none",
            label="std, typical input (half the mirrors on)")
    ax.plot(temps, [r.std_lower for r in reports], "s--", color="C1", markersize=4,
            label=f"std_lower, any input ({level:.0%} lower bound; accounting)")
    ax.set_xlabel("sensor temperature (C)")
    exposure = cal.exposures_us[0]
    shown = f"{exposure / 1e6:g} s" if exposure >= 1e5 else f"{exposure:g} us"
    ax.set_ylabel(f"output noise std (output units; {shown} exposure)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7.5, loc="upper left")
    ax.set_title("noise in the returned values", fontsize=10)

    if eps is not None:
        ax = axes[2]
        ax.plot(temps, eps, "o-", color="C2")
        ax.set_yscale("log")
        _plain_ticks(ax.yaxis)
        ax.set_xlabel("sensor temperature (C)")
        ax.set_ylabel(f"epsilon at delta = {delta:.0e}".replace("e-0", "e-"))
        ax.set_title(f"{shape.sampling} Gaussian, m={shape.batch_size} of N={shape.dataset_size}, {steps} steps,\n"
                     f"L2 sensitivity {shape.sensitivity:g}, noise std = std_lower", fontsize=8.5)
    fig.suptitle(f"{cal.device.profile}: calibration ({cal.frames_per_series} frames per series)", fontsize=10)
    _save(fig, path)


def _save(fig: Any, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
