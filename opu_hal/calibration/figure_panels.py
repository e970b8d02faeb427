"""The two measured laws of the calibration figure, one axes each: the photon-transfer curve (temporal
variance against mean signal, EMVA 1288 Release 4.0 eq. (8)-(9)) and the dark current against
temperature with its fitted law (:mod:`.temperature`). Artists that tests look for carry a ``gid``."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..camera.physics import BOLTZMANN_EV_PER_K, FOM_REFERENCE_K, KELVIN_OFFSET
from .schema import Calibration, PhotonTransferPoint, TemperatureLaw
from .temperature import law_rate

PTC_AXES, PTC_FIT, DARK_AXES, DARK_LAW, DARK_BAND = "ptc", "ptc-fit", "dark-current", "dark-law", "dark-law-band"


def plain_ticks(axis: Any) -> None:
    """Tick labels as plain numbers (0.5, 20, 1000), not as powers like 6x10^-1."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))


def ptc_line(cal: Calibration, signal_dn: np.ndarray) -> np.ndarray:
    """Temporal variance (DN^2) the fitted camera predicts at ``signal_dn`` above dark: read noise and
    ADC rounding, ``(sigma_r / g)^2 + 1/12``, plus shot noise ``signal / g`` (EMVA 1288 eq. (8)-(9))."""
    g = cal.gain_e_per_dn.value
    return (cal.read_noise_e.value / g) ** 2 + 1 / 12 + np.asarray(signal_dn) / g


def _series(points: Sequence[PhotonTransferPoint]) -> str:
    """What the sweep varied: the anchor power at one exposure, or the exposure."""
    exposures = sorted({p.exposure_us for p in points})
    if len(exposures) == 1:
        return f"{exposures[0]:g} us exposure, anchor power swept"
    return f"exposure swept {exposures[0]:g}-{exposures[-1]:g} us"


def draw_photon_transfer(ax: Any, cal: Calibration) -> None:
    """Variance against signal (log-log, DN^2 vs DN; e- on the top axis), the sweep's levels (filled:
    used by the gain fit), the line of the fitted gain and read noise, saturation and the clip level."""
    ax.set_gid(PTC_AXES)
    g, read = cal.gain_e_per_dn, cal.read_noise_e
    points = [p for p in cal.photon_transfer_curve or [] if p.signal_dn > 0]
    clip_dn, sat_dn = cal.saturation_e.value / g.value, cal.saturation_point_e.value / g.value
    if points:
        x = np.array([p.signal_dn for p in points])
        y = np.array([p.variance_dn2 for p in points])
        fit = np.array([p.in_fit for p in points])
        ax.plot(x[fit], y[fit], "o", color="C0", markersize=4, label=f"{_series(points)}:\nin the gain fit")
        ax.plot(x[~fit], y[~fit], "o", color="C0", markersize=4, markerfacecolor="none", label="not in the fit")
        low = float(x.min())
    else:
        low = max(sat_dn * 1e-3, 1.0)
        ax.text(
            0.03,
            0.97,
            "no sweep points in this calibration file\n(written before they were stored)",
            transform=ax.transAxes,
            va="top",
            fontsize=7.5,
        )
    line_x = np.geomspace(low, sat_dn, 200)
    floor = float(ptc_line(cal, np.zeros(1))[0])
    ax.plot(
        line_x,
        ptc_line(cal, line_x),
        "-",
        color="C1",
        gid=PTC_FIT,
        label=f"fit: slope 1/g = {1 / g.value:.4g} DN^2/DN\n+ (sigma_r/g)^2 + 1/12 = {floor:.3g} DN^2 (dotted)",
    )
    ax.axhline(floor, color="C1", linestyle=":", linewidth=1)
    ax.axvline(
        sat_dn,
        color="C3",
        linestyle="--",
        linewidth=1,
        label=f"saturation point (largest variance): {cal.saturation_point_e.value:.4g} e-, {sat_dn:.4g} DN",
    )
    ax.axvline(
        clip_dn,
        color="k",
        linestyle="-.",
        linewidth=1,
        label=f"clip level ({'full well' if cal.saturation_limited_by == 'full_well' else 'ADC top'}): "
        f"{cal.saturation_e.value:.4g} e-, {clip_dn:.4g} DN",
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("mean signal above dark (DN)")
    ax.set_ylabel("temporal variance (DN^2)")
    top = ax.secondary_xaxis("top", functions=(lambda v: v * g.value, lambda v: v / g.value))
    top.set_xlabel("mean signal above dark (e-)", fontsize=8)
    ax.text(
        0.97,
        0.03,
        f"gain g = {g.value:.4g} e-/DN [{g.lower:.4g}, {g.upper:.4g}]\n"
        f"read noise sigma_r = {read.value:.3g} e- [{read.lower:.3g}, {read.upper:.3g}]\n"
        f"({g.level:.0%} intervals)",
        transform=ax.transAxes,
        ha="right",
        va="bottom",
        fontsize=7.5,
        bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "0.7"},
    )
    ax.legend(fontsize=6.5, loc="upper left")
    ax.set_title("photon transfer", fontsize=10)


def law_band(law: TemperatureLaw, temperatures_c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lowest and highest rate (e-/s) at ``temperatures_c`` over the corners of the law's intervals:
    the figure of merit (the rate at 300 K) and, when fitted, the local activation energy, which
    tilts ``ln D`` by ``-(E_a - E_a_hat) (1/kT - 1/k 300 K)`` about 300 K."""
    rate = np.array([law_rate(law, float(t)) for t in temperatures_c])
    fom = law.dark_fom_na_per_cm2
    scales = [fom.lower / fom.value, fom.upper / fom.value]
    shifts = [0.0]
    if law.activation_energy_ev is not None:
        ea = law.activation_energy_ev
        shifts = [ea.lower - ea.value, ea.upper - ea.value]
    x = 1 / (BOLTZMANN_EV_PER_K * (np.asarray(temperatures_c) + KELVIN_OFFSET)) - 1 / (
        BOLTZMANN_EV_PER_K * FOM_REFERENCE_K
    )
    corners = np.stack([rate * s * np.exp(-d * x) for s in scales for d in shifts])
    return corners.min(axis=0), corners.max(axis=0)


def draw_dark_current_law(ax: Any, cal: Calibration) -> None:
    """Measured dark rates with their intervals, the fitted law and its band, against temperature (log)."""
    ax.set_gid(DARK_AXES)
    rates = [d.rate_e_per_s for d in cal.dark_current]
    temps = np.array([d.temperature_c for d in cal.dark_current])
    if rates:
        ax.errorbar(
            temps,
            [r.value for r in rates],
            yerr=[[r.value - r.lower for r in rates], [r.upper - r.value for r in rates]],
            fmt="o",
            color="C3",
            capsize=3,
            markersize=4,
            zorder=3,
            label=f"measured, typical pixels ({rates[0].level:.0%} interval)",
        )
    law = cal.temperature_law
    if law is not None:
        span = (float(temps.min()), float(temps.max())) if temps.size else (20.0, 30.0)
        margin = max(5.0, 0.1 * (span[1] - span[0]))
        grid = np.linspace(span[0] - margin, span[1] + margin, 120)
        low, high = law_band(law, grid)
        fom = law.dark_fom_na_per_cm2
        shape = "quadratic in 1/kT" if law.coefficients is not None else "Konnik-Welsh shape, assumed"
        ax.plot(
            grid,
            [law_rate(law, float(t)) for t in grid],
            "-",
            color="C0",
            gid=DARK_LAW,
            label=f"fitted law ({shape}): FOM {fom.value:.3g} nA/cm^2",
        )
        band = ax.fill_between(
            grid,
            low,
            high,
            color="C0",
            alpha=0.2,
            label=f"{fom.level:.0%} band: FOM"
            + (" and E_a" if law.activation_energy_ev else "")
            + " over their intervals",
        )
        band.set_gid(DARK_BAND)
        lines = [note.split(";")[0] for note in law.notes if note.startswith(("lack of fit", "left out"))]
        if law.doubling_temperature_k is not None:
            td = law.doubling_temperature_k
            lines.insert(
                0, f"doubles every {td.value:.3g} K [{td.lower:.3g}, {td.upper:.3g}] at {law.doubling_reference_c:g} C"
            )
        ax.text(
            0.03,
            0.97,
            "\n".join(textwrap.fill(line, 60) for line in lines),
            transform=ax.transAxes,
            va="top",
            fontsize=7,
        )
    ax.set_yscale("log")
    plain_ticks(ax.yaxis)
    ax.set_xlabel("sensor temperature (C)")
    ax.set_ylabel("dark current (e-/s per pixel)")
    ax.legend(fontsize=6.5, loc="lower right")
    ax.set_title("dark current against temperature", fontsize=10)
