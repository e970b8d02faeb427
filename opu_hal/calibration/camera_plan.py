"""Camera time against noise for the lattice mechanism (issue 29): the trade-off over the lattice
resolution ``k`` at one calibrated operating point.

Per coordinate (:mod:`opu_hal.privacy.rounding`), the Poisson mean a count needs is ``mu(k)``, about
``(z k)^2 / 2``; a count sums ``r = ceil(mu / mu_read)`` whole anchor reads, so the applied mean is
``r mu_read`` and the noise on the update, in units of its sensitivity ``Delta``, is
``sqrt(2 r mu_read) / k``. Below the resolution one read supplies, more camera time buys nothing
(the frames per step are fixed by one read per count) and the noise is larger than the target
needs; above it, every doubling of ``k`` roughly quadruples the reads for a noise that only
approaches the target's ``z``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

from ..privacy.skellam import required_poisson_mean
from .plan import OperatingPlan, RequiredPoissonMean, RunShape


@dataclass(frozen=True)
class CameraTradeOff:
    """One lattice resolution at one operating point."""

    lattice_resolution: float
    poisson_mean_needed: float
    reads_per_count: int
    frames_per_step: int
    camera_seconds: float
    noise_over_sensitivity: float


def resolution_that_one_read_supplies(best: OperatingPlan, shape: RunShape) -> float:
    """The largest ``k`` whose mean ``best``'s reads supply (``mu`` scales as ``k^2``)."""
    assert shape.lattice_resolution is not None
    return shape.lattice_resolution * math.sqrt(best.reads_per_value * best.supplied / best.needed)


def trade_off(
    best: OperatingPlan,
    shape: RunShape,
    target_epsilon: float,
    delta: float,
    required_poisson_mean: RequiredPoissonMean,
    pixels: int,
    frame_s: float,
    factors: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0),
) -> list[CameraTradeOff]:
    """Camera time and noise for ``k`` = ``factors`` times the resolution one read supplies."""
    assert shape.dimension is not None
    fill = resolution_that_one_read_supplies(best, shape)
    rows = []
    for factor in factors:
        k = fill * factor
        mu = required_poisson_mean(target_epsilon, delta, dataclasses.replace(shape, lattice_resolution=k))
        reads = math.ceil(mu / best.supplied)
        frames = math.ceil(2 * reads * shape.dimension / pixels)
        rows.append(
            CameraTradeOff(
                k, mu, reads, frames, frames * shape.steps * frame_s, math.sqrt(2 * reads * best.supplied) / k
            )
        )
    return rows


def format_trade_off(rows: list[CameraTradeOff]) -> str:
    lines = [f"  {'k':>9} {'mu needed':>11} {'reads':>6} {'frames/step':>11} {'camera (s)':>11} {'noise/Delta':>11}"]
    lines += [
        f"  {r.lattice_resolution:9.4g} {r.poisson_mean_needed:11.4g} {r.reads_per_count:6d} "
        f"{r.frames_per_step:11d} {r.camera_seconds:11.4g} {r.noise_over_sensitivity:11.4g}"
        for r in rows
    ]
    return "\n".join(lines)


def plot_trade_off(rows: list[CameraTradeOff], path: str | Path) -> None:
    """Camera seconds of the run against the noise, one point per ``k``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(5.5, 4))
    axis.plot([r.noise_over_sensitivity for r in rows], [r.camera_seconds for r in rows], "o-")
    for r in rows:
        axis.annotate(
            f"k={r.lattice_resolution:.3g}",
            (r.noise_over_sensitivity, r.camera_seconds),
            fontsize=8,
            textcoords="offset points",
            xytext=(4, 4),
        )
    axis.set_xlabel("noise std / sensitivity (applied)")
    axis.set_ylabel("camera seconds for the run")
    axis.set_yscale("log")
    axis.set_title("lattice mechanism: camera time against noise", fontsize=9)
    figure.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def profile_trade_off(
    best: OperatingPlan, shape: RunShape, target_epsilon: float, delta: float, profile
) -> list[CameraTradeOff]:
    """The trade-off at the cheapest point, at ``profile``'s sensor size and frame time."""
    frame_s = best.camera_seconds_per_step / best.frames_per_step if best.frames_per_step else 0.0
    return trade_off(best, shape, target_epsilon, delta, required_poisson_mean, profile.sensor_pixels, frame_s)


def print_trade_off(best: OperatingPlan, rows: list[CameraTradeOff]) -> None:
    """Camera time against noise over the lattice resolution at the cheapest point, as a table."""
    print(
        f"trade-off at {best.temperature_c:g} C, {best.exposure_us:g} us (k relative to the resolution one read supplies):"
    )
    print(format_trade_off(rows))


def speckle_summary(best: OperatingPlan) -> str:
    """A speckle anchor's kept pixels, reads per count and camera time at the cited frame period."""
    period = best.frame_time_s or 0.0
    return (
        f"speckle anchor: {best.kept_pixels} kept pixels (per-pixel calibrated bounds), {best.reads_per_value} "
        f"read(s) per count (accounted mean {best.reads_per_value * best.supplied:.4g} e- >= {best.needed:.4g} "
        f"needed), {best.frames_per_step} frame(s) per step at {period * 1e3:.4g} ms ({1 / period if period else 0:.4g} "
        f"fps), and {best.anchor_check_frames} drift-check frame(s): {best.time_s:.4g} camera seconds for the run; applied noise {best.noise_ratio:.3g}x the accounted "
        "(planned from the map's estimates)"
    )


def camera_summary(best: OperatingPlan, shape: RunShape) -> str:
    """The cheapest point's camera time, and the largest lattice resolution its reads supply."""
    if best.kept_pixels is not None:
        return speckle_summary(best)
    text = (
        f"camera: {best.frames_per_step} anchor-only frame(s) of the whole sensor per step, "
        f"{best.camera_seconds_per_step:.4g} s per step, {best.time_s:.4g} s for the run "
        f"({best.time_s / 60:.3g} min); applied noise {best.noise_ratio:.3g}x the accounted"
    )
    if shape.rounding_analysis == "per-coordinate" and shape.lattice_resolution and best.needed > 0:
        fill = resolution_that_one_read_supplies(best, shape)
        text += (
            f"; {best.reads_per_value} read(s) per count supply lambda {best.reads_per_value * best.supplied:.4g} e-:"
            f" --lattice-resolution up to {math.floor(fill * 1000) / 1000:g} costs no more camera time"
        )
    if best.reads_per_value == 1:
        text += (
            "; binding: one read per count, so the frames per step are the 2 d counts over the sensor's "
            "pixels (a dimmer anchor or a larger k would need more reads)"
        )
    return text
