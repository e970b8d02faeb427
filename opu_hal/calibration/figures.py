"""The calibration figure ``opu-hal calibrate`` writes: one quantity per panel, with its unit and its
interval named: photon transfer, dark-current law, output noise and (with a described run) epsilon."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..privacy.run_shape import RunShape, run_description
from .figure_panels import plain_ticks as _plain_ticks
from .schema import Calibration


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


def _noise_panel(ax: Any, cal: Calibration, temps: list[float], reports: list) -> None:
    """Noise std of the returned values (typical input) and ``std_lower`` (accounting) per temperature."""
    level = reports[0].details.get("bound_level", 0.9)
    ax.plot(
        temps,
        [r.std for r in reports],
        "o-",
        color="C0",
        markersize=8,
        markerfacecolor="none",
        label="std, typical input (half the mirrors on)",
    )
    ax.plot(
        temps,
        [r.std_lower for r in reports],
        "s--",
        color="C1",
        markersize=4,
        label=f"std_lower, any input ({level:.0%} lower bound; accounting)",
    )
    if len(temps) == 1:
        for value, color in ((reports[0].std, "C0"), (reports[0].std_lower, "C1")):
            ax.annotate(f"{value:.4g}", (temps[0], value), textcoords="offset points", xytext=(8, -3), color=color)
    ax.set_xlabel("sensor temperature (C)")
    exposure = cal.exposures_us[0]
    shown = f"{exposure / 1e6:g} s" if exposure >= 1e5 else f"{exposure:g} us"
    ax.set_ylabel(f"output noise std (output units; {shown} exposure)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7.5, loc="lower right")
    ax.set_title("noise in the returned values", fontsize=10)


def _epsilon_panel(ax: Any, temps: list[float], eps: list[float], shape: RunShape, steps: int, delta: float) -> None:
    """Epsilon of the described run at ``std_lower``, per temperature."""
    ax.plot(temps, eps, "o-", color="C2")
    ax.set_yscale("log")
    _plain_ticks(ax.yaxis)
    ax.set_xlabel("sensor temperature (C)")
    ax.set_ylabel(f"epsilon at delta = {delta:.0e}".replace("e-0", "e-"))
    ax.set_title(
        f"{shape.sampling} Gaussian, m={shape.batch_size} of N={shape.dataset_size}, {steps} steps,\n"
        f"L2 sensitivity {shape.sensitivity:g}, noise std = std_lower",
        fontsize=8.5,
    )


def plot_calibration(
    cal: Calibration, profile: Any, path: Path, shape: RunShape | None, delta: float, source: Path | None = None
) -> None:
    """The photon-transfer curve, the dark-current law, the output noise and (with a described run)
    epsilon, one panel each (:mod:`.figure_panels` draws the first two); ``source``: the calibration's
    file (its anchor map bounds a speckle reference's brightest pixel)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .calibrated import CalibratedNoise
    from .figure_panels import draw_dark_current_law, draw_photon_transfer

    model = CalibratedNoise(
        cal, source or path, profile.mode, cal.exposures_us[0], profile.laser_power_uw, profile.anchor_power_uw
    )
    temps = cal.temperatures_c
    reports = [model.report(t) for t in temps]
    eps, steps = epsilons(reports, shape, delta) if shape is not None else (None, 0)
    fig, axes = plt.subplots(2, 2, figsize=(12.5, 9.5))
    draw_photon_transfer(axes[0, 0], cal)
    draw_dark_current_law(axes[0, 1], cal)
    _noise_panel(axes[1, 0], cal, temps, reports)
    if eps is not None and shape is not None:
        _epsilon_panel(axes[1, 1], temps, eps, shape, steps, delta)
    else:
        axes[1, 1].remove()
    fig.suptitle(
        f"{cal.device.profile}: calibration ({cal.frames_per_series} frames per series, {len(temps)} temperature(s))",
        fontsize=10,
    )
    _save(fig, path)


def _save(fig: Any, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
