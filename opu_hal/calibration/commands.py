"""The work of ``opu-hal calibrate`` (measure, write the file and a plot) and ``opu-hal plan --profile``;
their parsers are in :mod:`opu_hal.cli`."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from ..contract.errors import CalibrationError
from ..privacy.events import PrivacyParameterError
from ..privacy.inverse import smallest_noise_multiplier
from ..privacy.run_shape import RunShape, as_flags, run_description, steps_for
from ..privacy.skellam import required_poisson_mean
from ..profiles.catalogue import load_profile
from ..profiles.registry import get_backend
from ..runtime.output import print_json
from ..runtime.paths import plot_format_reason, same_file, unwritable_reason
from .camera_plan import CameraTradeOff, camera_summary, plot_trade_off, print_trade_off, profile_trade_off
from .figures import plot_calibration
from .frames import check_frames_fit
from .plan import OperatingPlan, plan_gaussian, plan_skellam, what_would
from .run import calibrate_device
from .schema import Calibration, read_calibration, write_calibration


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


CAMERA_KEYS = ("mode", "exposure_us", "laser_power_uw", "anchor_power_uw", "temperature_min_c", "temperature_max_c")


def require_camera_profile(profile, what: str) -> None:
    """Refuse a profile that declares no camera model (a torch profile; a LightOn profile, whose laser
    and anchor powers are not declared): ``what`` needs its exposure, powers and temperature range."""
    missing = [key for key in CAMERA_KEYS if getattr(profile, key, None) is None]
    if missing and profile.backend == "lighton":
        raise CalibrationError(
            f"{what}: profile {profile.label!r} (backend lighton) lacks the key(s) "
            f"{', '.join(dict.fromkeys('temperature_c' if k.startswith('temperature') else k for k in missing))}: lightonml "
            "1.4.3 reads no temperature and knows no optical power, so the profile declares the camera's operating "
            "temperature (temperature_c), exposure_us, the power at the sensor (laser_power_uw) and, only for an OPU "
            "with a reference beam, anchor_power_uw (photon transfer and anchor frames need it)"
        )
    if missing:
        problem = "has no camera to calibrate" if what == "calibrate" else "declares no camera model to plan with"
        raise CalibrationError(
            f"{what}: profile {profile.label!r} (backend {profile.backend}) {problem} "
            f"(no {', '.join(missing)}); give a simulated OPU profile (e.g. opu-sim-dp)"
        )


def camera_exposure_us(profile: Any) -> float:
    """The exposure of a profile :func:`require_camera_profile` accepted (simulated and lighton
    profiles both declare ``exposure_us``; the base profile does not)."""
    return float(profile.exposure_us)


def _check_distinct(values: list[float] | None, option: str) -> None:
    if values is not None and len(set(values)) != len(values):
        raise CalibrationError(
            f"{option} must be distinct values (each is one calibrated point), got {' '.join(f'{v:g}' for v in values)}"
        )


def _check_output(path: str | None, option: str) -> None:
    """Refuse, before measuring, an output path that could not be written afterwards."""
    if path is None:
        return
    reason = unwritable_reason(path)
    if reason is not None:
        raise CalibrationError(f"{option} {path}: not a writable file path ({reason})")


def _check_outputs(args: argparse.Namespace) -> Path:
    """Check --out and the plot path before measuring; returns the plot path."""
    _check_output(args.out, "--out")
    plot = Path(args.plot) if args.plot else Path(args.out).with_suffix(".png")
    option = "--plot" if args.plot else f"the plot's default path (--out {args.out} with .png)"
    _check_output(str(plot), option)
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
    plot = _check_outputs(args)
    _check_distinct(args.temperatures, "--temperatures")
    _check_distinct(args.exposures, "--exposures")
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
    shape = _shape(args) if args.dataset_size else None
    plot_calibration(calibration, profile, plot, shape, args.delta)
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
        f"  {'T (C)':>6} {'dark e-/s':>10} {'[95% CI]':>22} {'exp (us)':>9} {'dark e-':>9} "
        f"{'anchor e-':>9} {'mu_read>=':>9}"
    )
    for dc in cal.dark_current:
        for op in (o for o in cal.operating_points if o.temperature_c == dc.temperature_c):
            r = dc.rate_e_per_s
            lines.append(
                f"  {dc.temperature_c:6.1f} {r.value:10.4g} {f'[{r.lower:.4g}, {r.upper:.4g}]':>22} "
                f"{op.exposure_us:9.4g} {op.dark_e.value:9.3g} {op.anchor_e.value:9.4g} "
                f"{op.anchor_read_e_min_pixel_lower:9.4g}"
            )
    return "\n".join(lines)


def _shape(args: argparse.Namespace) -> RunShape:
    n, m = args.dataset_size, args.batch_size
    if not (n and m and 1 <= m <= n):
        raise CalibrationError(f"need 1 <= --batch-size <= --dataset-size, got {m} and {n}")
    try:
        steps = steps_for(n, m, epochs=1.0 if args.epochs is None else args.epochs, steps=args.steps)
    except PrivacyParameterError as exc:
        raise CalibrationError(as_flags(str(exc))) from exc
    dimension, resolution = getattr(args, "dimension", None), getattr(args, "lattice_resolution", None)
    lattice = getattr(args, "mechanism", "gaussian") in ("skellam", "digitized")
    if lattice:
        if dimension is None or not dimension >= 1 or resolution is None or not resolution > 0:
            raise CalibrationError(
                "--mechanism skellam (the lattice mechanism of dp-dfa --noise-source device) needs "
                "--dimension D >= 1 (the update's parameters) and --lattice-resolution K > 0"
            )
        return RunShape(
            sampling=args.sampling,
            dataset_size=n,
            batch_size=m,
            steps=steps,
            sensitivity=args.sensitivity or 1.0,
            dimension=dimension,
            lattice_resolution=resolution,
            rounding_analysis=getattr(args, "rounding_analysis", "per-coordinate"),
        )
    if args.sensitivity is None or not args.sensitivity > 0:
        raise CalibrationError("--sensitivity (l2, output units) > 0 is needed to map noise to epsilon")
    return RunShape(sampling=args.sampling, dataset_size=n, batch_size=m, steps=steps, sensitivity=args.sensitivity)


def gaussian_noise_multiplier(target_epsilon: float, delta: float, shape: RunShape) -> float:
    """Smallest noise multiplier for the shipped Gaussian accountant (tested against dp-accounting)."""
    event_for, neighboring, steps = run_description(shape)
    return smallest_noise_multiplier(event_for, steps, target_epsilon, delta, neighboring)


def _check_plan_plot(path: str | None) -> None:
    """Refuse, before planning, a ``--plot`` that could not be written."""
    if path is None:
        return
    _check_output(path, "--plot")
    reason = plot_format_reason(path)
    if reason is not None:
        raise CalibrationError(f"--plot {path}: {reason}")


def _plan_calibration(args: argparse.Namespace, profile) -> Calibration:
    """The calibration ``plan --profile`` reads (``--calibration``, else the profile's, relative to it),
    checked against the profile as train's device checks it."""
    cal_path = args.calibration or profile.calibration
    if cal_path is None:
        raise CalibrationError(
            f"profile {profile.label!r} names no calibration: pass --calibration CAL (written by `opu-hal calibrate`)"
        )
    if args.calibration is None and profile.source is not None and not Path(cal_path).is_absolute():
        cal_path = Path(profile.source).parent / cal_path
    calibration = read_calibration(cal_path)
    from .calibrated import check_profile

    check_profile(calibration, profile, Path(cal_path))
    return calibration


def _plan_figure(
    args: argparse.Namespace, profile, plans: list[OperatingPlan], shape: RunShape
) -> list[CameraTradeOff] | None:
    """Write ``--plot`` for every mechanism, reaching or not: the lattice trade-off over the resolution
    (skellam, per-coordinate, with a point that reaches; its rows are returned), else the operating points."""
    reaching = [p for p in plans if p.reaches_target]
    if args.mechanism == "skellam" and shape.rounding_analysis == "per-coordinate" and reaching:
        rows = profile_trade_off(reaching[0], shape, args.target_epsilon, args.delta, profile)
        plot_trade_off(rows, args.plot)
        return rows
    from .plan_figures import plot_operating_points

    plot_operating_points(
        plans,
        args.mechanism,
        f"{profile.label}: {args.mechanism} mechanism, target epsilon "
        f"{args.target_epsilon:g} at delta {args.delta:g}, {shape.steps} steps of {shape.batch_size} "
        f"({shape.sampling})",
        args.plot,
    )
    return None


def run_plan(args: argparse.Namespace) -> int:
    """``opu-hal plan --profile P [--calibration CAL] ...``: operating points for the target (and ``--plot``)."""
    _check_plan_plot(getattr(args, "plot", None))
    profile = load_profile(args.profile)
    require_camera_profile(profile, "plan --profile")
    if args.mechanism == "digitized":
        from .digitized_command import run_digitized_plan

        cal_path = args.calibration or profile.calibration
        if (
            cal_path is not None
            and args.calibration is None
            and profile.source is not None
            and not Path(cal_path).is_absolute()
        ):
            cal_path = Path(profile.source).parent / cal_path
        return run_digitized_plan(args, profile, cal_path, _shape(args))
    calibration = _plan_calibration(args, profile)
    shape = _shape(args)
    if args.mechanism == "skellam":
        plans = plan_skellam(calibration, profile, args.target_epsilon, args.delta, shape, required_poisson_mean)
    else:
        plans = plan_gaussian(calibration, profile, args.target_epsilon, args.delta, shape, gaussian_noise_multiplier)
    reaching = [p for p in plans if p.reaches_target]
    rows = _plan_figure(args, profile, plans, shape) if getattr(args, "plot", None) else None
    if args.json:
        print_json(
            {
                "mechanism": args.mechanism,
                "target_epsilon": args.target_epsilon,
                "delta": args.delta,
                "steps": shape.steps,
                "plans": [p.to_dict() for p in plans],
                "none_reaches": None if reaching else what_would(plans, calibration),
            }
        )
        return 0 if reaching else 1
    print(
        f"{profile.label}: {args.mechanism} mechanism, target epsilon {args.target_epsilon:g} at delta "
        f"{args.delta:g}, {shape.steps} steps of {shape.batch_size} ({shape.sampling})"
    )
    print(
        f"{'':2}{'T (C)':>6} {'exp (us)':>9} {'reaches':>7} {'needed':>10} {'supplied':>10} {'reads':>5} "
        f"{'frames':>10} {'time (s)':>9} {'noise':>9}"
    )
    for p in plans:
        print(
            f"  {p.temperature_c:6.1f} {p.exposure_us:9.4g} {'yes' if p.reaches_target else 'no':>7} "
            f"{p.needed:10.4g} {p.supplied:10.4g} {p.reads_per_value:5d} {p.frames_total:10d} "
            f"{p.time_s:9.4g} {p.noise_std:9.4g}"
        )
    if not reaching:
        print(what_would(plans, calibration))
    elif args.mechanism == "skellam":
        print(camera_summary(reaching[0], shape))
        if rows is not None:
            print_trade_off(reaching[0], rows)
    if getattr(args, "plot", None):
        print(f"wrote {args.plot}")
    return 0 if reaching else 1
