"""The built-in commands of ``opu-hal``: devices, info, noise, project, check, account, plan and
calibrate. Each handler imports its command's module only when the command runs, so building the
parser imports nothing heavy (no torch, no accountant, no backend)."""

from __future__ import annotations

import argparse

from .runtime.output import add_json_option

#: argparse choices, kept equal to opu_hal.privacy.run_shape.SAMPLINGS by tests/test_cli_convention.py.
SAMPLINGS = ("poisson", "fixed", "rejection")


def register_builtin_commands(sub: argparse._SubParsersAction) -> None:
    """The device, privacy and calibration commands."""
    _register_device_commands(sub)
    _register_privacy_commands(sub)
    _register_calibration_commands(sub)


# -- handlers: each imports its command's module when the command runs -------------------------
def _cmd_devices(args: argparse.Namespace) -> int:
    from .devices_command import cmd_devices

    return cmd_devices(args)


def _cmd_info(args: argparse.Namespace) -> int:
    from .commands import cmd_info

    return cmd_info(args)


def _cmd_noise(args: argparse.Namespace) -> int:
    from .commands import cmd_noise

    return cmd_noise(args)


def _cmd_project(args: argparse.Namespace) -> int:
    from .commands import cmd_project

    return cmd_project(args)


def _cmd_check(args: argparse.Namespace) -> int:
    from .commands import cmd_check

    return cmd_check(args)


def _cmd_account(args: argparse.Namespace) -> int:
    from .privacy.commands import cmd_account

    return cmd_account(args)


def _cmd_plan(args: argparse.Namespace) -> int:
    from .privacy.commands import cmd_plan

    return cmd_plan(args)


def _device_plan(args: argparse.Namespace) -> int:
    from .profiles.catalogue import load_profile

    profile = load_profile(args.profile)
    recorded = profile.backend == "lighton" and not getattr(profile, "simulated", True)
    if recorded and args.mechanism in ("digitized", "skellam"):  # device noise: from its recorded calibration
        from .calibration.recorded_plan import run_recorded_plan

        return run_recorded_plan(args, profile)
    from .calibration.plan_command import run_plan

    return run_plan(args)


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from .calibration.calibrate_command import cmd_calibrate

    return cmd_calibrate(args)


# -- parsers ------------------------------------------------------------------------------------
def _register_device_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("devices", help="list the profiles with backend and sizes")
    p.add_argument(
        "--dir",
        default=None,
        help="profile folder (default: $OPU_HAL_PROFILE_DIR when set, else the packaged profiles)",
    )
    add_json_option(p)
    p.set_defaults(func=_cmd_devices)

    p = sub.add_parser("info", help="print one validated profile and the device's capabilities")
    p.add_argument("profile", help="profile path or name")
    add_json_option(p)
    p.set_defaults(func=_cmd_info)

    p = sub.add_parser("noise", help="noise report against sensor temperature")
    p.add_argument("profile", help="profile path or name")
    p.add_argument("--min", type=float, default=None, help="lowest temperature, C (default: the profile's)")
    p.add_argument("--max", type=float, default=None, help="highest temperature, C (default: the profile's)")
    p.add_argument("--points", type=int, default=9, help="temperatures in the sweep, 1 to 1000 (default 9)")
    add_json_option(p)
    p.set_defaults(func=_cmd_noise)

    p = sub.add_parser("project", help="project a random batch and print the noise report")
    p.add_argument("profile", help="profile path or name")
    p.add_argument("--batch", type=int, default=8, help="rows in the batch (default 8)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random batch, in [0, 2^63 - 1] (default 0)")
    p.add_argument(
        "--max-seconds",
        type=float,
        default=60.0,
        help="refuse a device whose matrix would take longer to generate, s (default 60)",
    )
    add_json_option(p)
    p.set_defaults(func=_cmd_project)

    p = sub.add_parser("check", help="run the device conformance suite (opu_hal.testing) on a profile")
    p.add_argument("profile", help="profile path or name (a plugin's profile included)")
    p.add_argument(
        "--only",
        action="append",
        default=None,
        metavar="CHECK",
        help="run only this check, repeatable (default: all; names as printed)",
    )
    add_json_option(p)
    p.set_defaults(func=_cmd_check)


def _add_run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--sampling",
        choices=SAMPLINGS,
        default="poisson",
        help="poisson (DP-SGD), fixed (without replacement, DP-DFA), rejection (DP-ULR) (default poisson)",
    )
    p.add_argument("--dataset-size", type=int, required=True, help="training examples N")
    p.add_argument("--batch-size", type=int, required=True, help="(expected) batch size m")
    length = p.add_mutually_exclusive_group(required=True)
    length.add_argument("--steps", type=int, help="training steps")
    length.add_argument("--epochs", type=float, help="epochs (steps = ceil(epochs * N / m))")
    p.add_argument("--min-batch", type=int, default=None, help="rejection threshold N_B (rejection sampling only)")
    p.add_argument("--delta", type=float, default=1e-5, help="target delta (default 1e-5)")
    add_json_option(p)


def _register_privacy_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("account", help="epsilon of a described private training run")
    _add_run_arguments(p)
    p.add_argument("--noise-multiplier", type=float, required=True, help="noise std / sensitivity")
    p.set_defaults(func=_cmd_account)

    p = sub.add_parser(
        "plan",
        help="smallest noise multiplier for a target (epsilon, delta); with --profile, the device's operating points",
    )
    _add_run_arguments(p)
    p.add_argument("--target-epsilon", type=float, required=True, help="target epsilon")
    p.add_argument(
        "--sensitivity",
        type=float,
        default=None,
        help="L2 sensitivity under the sampling's relation, to also print the noise std: poisson and "
        "rejection: add/remove one example (C for a sum of per-example terms clipped to C); "
        "fixed: replace one example (2C for the same sum)",
    )
    device = p.add_argument_group("device mode (--profile)")
    device.add_argument("--profile", default=None, help="operating points of this profile (simulated OPU)")
    device.add_argument(
        "--calibration",
        default=None,
        help="calibration file, relative to the working directory (default: the profile's)",
    )
    device.add_argument(
        "--mechanism",
        choices=("gaussian", "skellam", "digitized"),
        default="gaussian",
        help="how device noise is accounted (default gaussian; skellam: the lattice mechanism of "
        "dp-dfa --noise-source device, with --sampling fixed or poisson; digitized: the same lattice with "
        "digitized reads at any gain, calibration optional)",
    )
    device.add_argument(
        "--max-reads", type=int, default=4096, help="digitized: most reads per count tried (default 4096)"
    )
    device.add_argument("--dimension", type=int, default=None, help="skellam: the update's parameters d")
    device.add_argument("--lattice-resolution", type=float, default=None, help="skellam: lattice resolution k")
    device.add_argument(
        "--rounding-analysis",
        choices=("per-coordinate", "worst-case"),
        default="per-coordinate",
        help="skellam: how randomized rounding is accounted (default per-coordinate)",
    )
    device.add_argument(
        "--plot",
        default=None,
        help="picture (PNG) of the plan, any mechanism, written whether or not a point reaches the "
        "target: supplied noise against needed and camera time per operating point; digitized: "
        "epsilon against reads per count; skellam per-coordinate: also print camera time against "
        "noise over the lattice resolution and draw that",
    )
    p.set_defaults(func=_cmd_plan, device_plan=_device_plan)


def _register_calibration_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="measure a device's camera noise (photon transfer) into a file")
    p.add_argument(
        "profile", nargs="?", default=None, help="profile path or name (with --frames-dir: the device it is for)"
    )
    p.add_argument(
        "--frames-dir",
        default=None,
        help="calibrate from recorded frames instead of a device: a folder with manifest.toml / manifest.json or "
        "an EMVA 1288 descriptor file (docs: 'Calibrate your own camera')",
    )
    p.add_argument(
        "--temperature",
        type=float,
        default=None,
        help="with --frames-dir: the sensor temperature (C) of an EMVA 1288 descriptor's frames (it states none)",
    )
    p.add_argument(
        "--temperatures",
        type=float,
        nargs="+",
        default=None,
        help="sensor temperatures, C (default: 5 across the profile's range)",
    )
    p.add_argument(
        "--exposures", type=float, nargs="+", default=None, help="operating exposures, us (default: the profile's)"
    )
    p.add_argument(
        "--dark-exposures",
        type=float,
        nargs="+",
        default=[100_000.0, 1_000_000.0],
        help="extra dark-frame exposures for dark current, us (default 1e5 1e6)",
    )
    p.add_argument("--frames", type=int, default=32, help="frames per series (default 32)")
    p.add_argument("--out", required=True, help="calibration JSON to write (relative to the working directory)")
    p.add_argument("--plot", default=None, help="PNG to write (default: --out with .png)")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors (and the JSON with --json)")
    add_json_option(p, "print the calibration summary and the files written as JSON")
    run = p.add_argument_group("described run (adds an epsilon panel to the plot)")
    run.add_argument(
        "--sampling",
        choices=SAMPLINGS,
        default="poisson",
        help="minibatch sampling of the described run (default poisson)",
    )
    run.add_argument("--dataset-size", type=int, default=None, help="training examples N (enables the panel)")
    run.add_argument("--batch-size", type=int, default=None, help="(expected) batch size m")
    run.add_argument("--epochs", type=float, default=None, help="epochs (default 1 when --steps is not given)")
    run.add_argument("--steps", type=int, default=None, help="training steps (instead of --epochs)")
    run.add_argument("--sensitivity", type=float, default=None, help="L2 sensitivity, output units")
    run.add_argument("--delta", type=float, default=1e-5, help="delta of the epsilon panel (default 1e-5)")
    p.set_defaults(func=_cmd_calibrate)
