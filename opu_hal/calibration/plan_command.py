"""The work of ``opu-hal plan --profile``: operating points of a calibrated camera for a privacy target
(and ``--plot``); the digitized mechanism is :mod:`.digitized_command`'s. The parser is in
:mod:`opu_hal.builtin_commands`."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..contract.anchor_map import AnchorBoundMap
from ..contract.errors import CalibrationError
from ..privacy.inverse import smallest_noise_multiplier
from ..privacy.run_shape import RunShape, run_description
from ..privacy.skellam import required_poisson_mean
from ..profiles.catalogue import load_profile
from ..runtime.output import print_json
from ..runtime.paths import plot_format_reason
from .anchor_map import anchor_map_path, load_anchor_map
from .camera_plan import CameraTradeOff, camera_summary, plot_trade_off, print_trade_off, profile_trade_off
from .command_args import check_output, require_camera_profile, shape_from_args
from .plan import OperatingPlan, plan_gaussian, plan_skellam, what_would
from .schema import Calibration, read_calibration


def gaussian_noise_multiplier(target_epsilon: float, delta: float, shape: RunShape) -> float:
    """Smallest noise multiplier for the shipped Gaussian accountant (tested against dp-accounting)."""
    event_for, neighboring, steps = run_description(shape)
    return smallest_noise_multiplier(event_for, steps, target_epsilon, delta, neighboring)


def _check_plan_plot(path: str | None) -> None:
    """Refuse, before planning, a ``--plot`` that could not be written."""
    if path is None:
        return
    check_output(path, "--plot")
    reason = plot_format_reason(path)
    if reason is not None:
        raise CalibrationError(f"--plot {path}: {reason}")


def _anchor_map(args: argparse.Namespace, profile, cal_path: Path) -> AnchorBoundMap | None:
    """The speckle anchor's per-pixel map next to the calibration ``cal_path`` (refused when a speckle
    profile has none)."""
    if getattr(profile, "privacy_anchor", None) != "speckle" or args.mechanism != "skellam":
        return None
    path = anchor_map_path(cal_path)
    if not path.exists():
        raise CalibrationError(
            f"{cal_path}: no anchor map ({path}) for the speckle anchor of {profile.label!r}: re-run `opu-hal calibrate`"
        )
    return load_anchor_map(path, profile.temperature_c, profile.exposure_us)


def _calibration_file(args: argparse.Namespace, profile) -> Path | None:
    """The calibration file ``plan --profile`` reads: ``--calibration``, else the profile's, relative to it;
    None when neither names one."""
    cal_path = args.calibration or profile.calibration
    if cal_path is None:
        return None
    if args.calibration is None and profile.source is not None and not Path(cal_path).is_absolute():
        return Path(profile.source).parent / cal_path
    return Path(cal_path)


def _plan_calibration(cal_path: Path | None, profile) -> tuple[Path, Calibration]:
    """The calibration at ``cal_path`` (refused when there is none), checked against the profile as
    train's device checks it."""
    if cal_path is None:
        raise CalibrationError(
            f"profile {profile.label!r} names no calibration: pass --calibration CAL (written by `opu-hal calibrate`)"
        )
    calibration = read_calibration(cal_path)
    from .identity import check_profile

    check_profile(calibration, profile, cal_path)
    return cal_path, calibration


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
    cal_path = _calibration_file(args, profile)
    if args.mechanism == "digitized":
        from .digitized_command import run_digitized_plan

        return run_digitized_plan(args, profile, cal_path, shape_from_args(args))
    cal_file, calibration = _plan_calibration(cal_path, profile)
    shape = shape_from_args(args)
    if args.mechanism == "skellam":
        plans = plan_skellam(
            calibration,
            profile,
            args.target_epsilon,
            args.delta,
            shape,
            required_poisson_mean,
            _anchor_map(args, profile, cal_file),
        )
    else:
        plans = plan_gaussian(
            calibration, profile, args.target_epsilon, args.delta, shape, gaussian_noise_multiplier, cal_file
        )
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
