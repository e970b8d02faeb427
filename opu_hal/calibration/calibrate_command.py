"""The work of ``opu-hal calibrate``: measure, write the calibration file, its plot and a summary; the
parser is in :mod:`opu_hal.builtin_commands`."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..contract.errors import CalibrationError
from ..profiles.catalogue import load_profile
from ..profiles.registry import get_backend
from ..runtime.output import print_json
from ..runtime.paths import plot_format_reason, same_file
from .anchor_map import anchor_map_path, calibrate_anchor_map
from .command_args import camera_exposure_us, check_distinct, check_output, require_camera_profile, shape_from_args
from .figures import plot_calibration
from .frames import check_frames_fit
from .run import calibrate_device
from .schema import Calibration, write_calibration


def progress_bar(done: int, total: int, what: str) -> None:
    width = 30
    filled = int(width * done / max(total, 1))
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {what[:40]:<40}")
    if done >= total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def default_temperatures(profile, count: int = 5) -> list[float]:
    """``count`` temperatures across the profile's settable range (one when the range is a point)."""
    low, high = profile.temperature_min_c, profile.temperature_max_c
    if high <= low:
        return [float(low)]
    return [low + (high - low) * i / (count - 1) for i in range(count)]


def _check_outputs(args: argparse.Namespace) -> Path:
    """Check --out and the plot path before measuring; returns the plot path."""
    check_output(args.out, "--out")
    plot = Path(args.plot) if args.plot else Path(args.out).with_suffix(".png")
    option = "--plot" if args.plot else f"the plot's default path (--out {args.out} with .png)"
    check_output(str(plot), option)
    if same_file(plot, args.out):
        raise CalibrationError(
            f"{option} {plot} is the --out path {args.out}: the plot would overwrite the "
            "calibration; give --out a .json path or --plot another file"
        )
    reason = plot_format_reason(plot)
    if reason is not None:
        raise CalibrationError(f"{option} {plot}: {reason}")
    return plot


#: The calibration's quantities as the calibrate command's flags (library errors name quantities).
CALIBRATION_FLAGS = {
    "frames (per series)": "--frames",
    "dark_exposures": "--dark-exposures",
    "(temperatures)": "(--temperatures)",
    "(exposures)": "(--exposures)",
}


def cmd_calibrate(args: argparse.Namespace) -> int:
    """``opu-hal calibrate``; a calibration error names the command's flags."""
    try:
        return _calibrate(args)
    except CalibrationError as exc:
        message = str(exc)
        for quantity, flag in CALIBRATION_FLAGS.items():
            message = message.replace(quantity, flag)
        raise CalibrationError(message) from exc


def _calibrate(args: argparse.Namespace) -> int:
    if getattr(args, "frames_dir", None) is not None:
        return _calibrate_recorded(args)
    if args.profile is None:
        raise CalibrationError(
            "calibrate needs a profile (the device to measure), or --frames-dir DIR (recorded frames)"
        )
    plot = _check_outputs(args)
    check_distinct(args.temperatures, "--temperatures")
    check_distinct(args.exposures, "--exposures")
    profile = load_profile(args.profile)
    require_camera_profile(profile, "calibrate")
    check_frames_fit(args.frames, profile.out_features)
    device = get_backend(profile.backend).create(profile)  # uncalibrated, whatever the profile names
    temperatures = args.temperatures or default_temperatures(profile)
    exposures = args.exposures or [camera_exposure_us(profile)]
    start = time.perf_counter()
    calibration = calibrate_device(
        device, temperatures, exposures, args.dark_exposures, args.frames, progress=None if args.quiet else progress_bar
    )
    elapsed = time.perf_counter() - start
    out = write_calibration(calibration, args.out)
    anchor_line = calibrate_anchor_map(device, calibration, Path(out))
    shape = shape_from_args(args) if args.dataset_size else None
    plot_calibration(calibration, profile, plot, shape, args.delta, Path(out))
    if args.json:
        print_json(
            {
                "calibration": str(out),
                "plot": str(plot),
                "elapsed_s": elapsed,
                "summary": calibration.model_dump(mode="json"),
            }
        )
    elif not args.quiet:
        print(summary(calibration, elapsed))
        print(f"wrote {out} and {plot}")
        if anchor_line:
            print(anchor_line)
    return 0


def _calibrate_recorded(args: argparse.Namespace) -> int:
    """``calibrate --frames-dir DIR``: the calibration of recorded frames (:mod:`.recorded`) and, for a profile
    with a speckle anchor, its per-pixel anchor map beside it (:mod:`.recorded_anchor_map`); no plot."""
    from .anchor_map import save_anchor_map
    from .recorded import calibrate_with_pixels
    from .recorded_anchor_map import map_note, measure_recorded_anchor_map

    check_output(args.out, "--out")
    profile = load_profile(args.profile) if args.profile else None
    start = time.perf_counter()
    calibration, read_noise = calibrate_with_pixels(args.frames_dir, profile=profile, temperature_c=args.temperature)
    measured = measure_recorded_anchor_map(args.frames_dir, calibration, profile, args.temperature, read_noise)
    if measured is not None:  # measured before anything is written: a refusal leaves no calibration behind
        calibration = calibration.model_copy(update={"notes": [*calibration.notes, map_note(args.out, *measured)]})
    elapsed = time.perf_counter() - start
    out = write_calibration(calibration, args.out)
    written, beside = None, anchor_map_path(out)
    if measured is not None:
        bounds, celsius, exposure = measured
        written = save_anchor_map(bounds, beside, celsius, exposure)
    elif beside.exists():  # a map of an earlier calibration at this path: measured with other intervals
        beside.unlink()
    if args.json:
        print_json(
            {
                "calibration": str(out),
                **({"anchor_map": str(written)} if written else {}),
                "elapsed_s": elapsed,
                "summary": calibration.model_dump(mode="json"),
            }
        )
    elif not args.quiet:
        print(summary(calibration, elapsed))
        print(f"wrote {out}" + (f" and {written} ({calibration.notes[-1]})" if written else ""))
    return 0


def summary(cal: Calibration, elapsed_s: float | None = None) -> str:
    def fmt(name, e):
        return f"  {name:<22} {e.value:10.4g}  [{e.lower:.4g}, {e.upper:.4g}] {e.unit} ({e.level:.0%}, {e.method})"

    lines = [
        f"calibration of {cal.device.profile} ({cal.device.backend}, seed {cal.device.seed}): "
        f"{cal.frames_total} frames of {cal.pixels} pixels"
        + (f" in {elapsed_s:.1f} s" if elapsed_s is not None else "")
    ]
    lines += [
        fmt("gain", cal.gain_e_per_dn),
        fmt("read noise", cal.read_noise_e),
        fmt("black level", cal.black_level_dn),
        fmt(f"saturation ({cal.saturation_limited_by})", cal.saturation_e),
        fmt("saturation point", cal.saturation_point_e),
        fmt("PRNU", cal.uniformity.prnu_pct),
        fmt("DSNU", cal.uniformity.dsnu_e),
        f"  linearity error {cal.linearity.error_min_pct:+.3g} .. {cal.linearity.error_max_pct:+.3g} % over "
        f"{cal.linearity.levels} of {cal.illumination_levels} levels; defect pixels: {cal.defect_pixels.hot} hot, "
        f"{cal.defect_pixels.dim} dim, {cal.defect_pixels.bright} bright",
    ]
    if cal.quantum_efficiency:
        lines.append(fmt("quantum efficiency", cal.quantum_efficiency))
    law = cal.temperature_law
    if law:
        lines.append(fmt("dark FOM", law.dark_fom_na_per_cm2))
        if law.doubling_temperature_k:
            lines.append(fmt(f"doubling at {law.doubling_reference_c:g} C", law.doubling_temperature_k))
        lines += [f"  law: {note}" for note in law.notes]
    lines.append(
        "  dark current: typical pixels (hot ones left out) and the mean over all pixels (EMVA 1288 mu_I.mean, a "
        "datasheet's figure); 'hot >': the rate above which a pixel is hot (10 robust sd above the median)"
    )
    lines.append(
        f"  {'T (C)':>6} {'dark e-/s':>10} {'[95% CI]':>22} {'all px':>10} {'hot >':>10} {'exp (us)':>9} "
        f"{'dark e-':>9} {'anchor e-':>9} {'mu_read>=':>9}"
    )
    for dc in cal.dark_current:
        for op in (o for o in cal.operating_points if o.temperature_c == dc.temperature_c):
            r, every = dc.rate_e_per_s, dc.rate_all_pixels_e_per_s
            lines.append(
                f"  {dc.temperature_c:6.1f} {r.value:10.4g} {f'[{r.lower:.4g}, {r.upper:.4g}]':>22} "
                f"{every.value if every else float('nan'):10.4g} {dc.hot_threshold_e_per_s or float('nan'):10.4g} "
                f"{op.exposure_us:9.4g} {op.dark_e.value:9.3g} {op.anchor_e.value:9.4g} "
                f"{op.anchor_read_e_min_pixel_lower:9.4g}"
            )
    return "\n".join(lines)
