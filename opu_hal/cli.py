"""opu-hal: list, inspect and check device profiles, project a batch, calibrate, account for privacy.

Commands register themselves on one argparse parser. Other packages add theirs through the
entry-point group ``opu_hal.commands`` (a callable taking the subparsers object); the trainers
package registers ``train``, ``tune``, ``plot``, ``table`` and ``audit`` that way, so opu_hal never
imports trainers. ``main``'s ``extra`` hook registers commands in-process (``python -m trainers.cli``
uses it, which also covers an install whose entry-point metadata predates the group).

Building the parser imports nothing heavy (no torch, no accountant, no backend): each command's
work lives in another module, imported by a small handler here when that command runs, so
``opu-hal --help`` answers at once.

The convention every command follows (``tests/test_cli_convention.py`` walks the parser): every
option has help text; ``--json`` prints data as one JSON document on stdout (nothing else there;
progress and logs go to stderr) wherever a command prints data; ``--out`` names a data file to
write, ``--plot`` a picture, each in a folder that exists; an unknown option is refused by its
command's parser; a reader of stdout that goes away ends the command quietly.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from importlib import metadata
from typing import Callable, Sequence

from .contract.errors import OpuHalError
from .contract.version import __version__

Register = Callable[[argparse._SubParsersAction], None]
COMMANDS_ENTRY_POINT_GROUP = "opu_hal.commands"
#: What a plugin's import may raise without taking the other commands down (as in opu_hal.profiles.registry).
PLUGIN_FAILURES = (Exception, SystemExit, KeyboardInterrupt)
#: argparse choices, kept equal to opu_hal.privacy.run_shape.SAMPLINGS by tests/test_cli_convention.py.
SAMPLINGS = ("poisson", "fixed", "rejection")


def installed_command_registrations() -> list[Register]:
    """The command registrations other installed packages declare (entry-point group
    ``opu_hal.commands``); a broken one is skipped with a warning."""
    found: list[Register] = []
    for entry in metadata.entry_points(group=COMMANDS_ENTRY_POINT_GROUP):
        try:
            register = entry.load()
        except PLUGIN_FAILURES as exc:  # a broken plugin must not take the device commands down
            warnings.warn(f"command entry point {entry.name!r} ({entry.value}) failed to load: "
                          f"{type(exc).__name__}: {exc}")
            continue
        if callable(register):
            found.append(register)
        else:
            warnings.warn(f"command entry point {entry.name!r} ({entry.value}) is not callable; ignored")
    return found


# -- handlers: each imports its command's module when the command runs -------------------------
def _cmd_devices(args: argparse.Namespace) -> int:
    from .commands import cmd_devices
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
    from .calibration.commands import run_plan
    return run_plan(args)


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from .calibration.commands import cmd_calibrate
    return cmd_calibrate(args)


# -- parsers ------------------------------------------------------------------------------------
def add_json_option(p: argparse.ArgumentParser, help: str = "print the result as JSON") -> None:
    """``--json``: the command prints one JSON document on stdout (:func:`opu_hal.runtime.output.print_json`)
    and nothing else there."""
    p.add_argument("--json", action="store_true", help=help)


def _register_device_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("devices", help="list the profiles with backend and sizes")
    p.add_argument("--dir", default=None,
                   help="profile folder (default: $OPU_HAL_PROFILE_DIR when set, else the packaged profiles)")
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
    p.add_argument("--max-seconds", type=float, default=60.0,
                   help="refuse a device whose matrix would take longer to generate, s (default 60)")
    add_json_option(p)
    p.set_defaults(func=_cmd_project)

    p = sub.add_parser("check", help="run the device conformance suite (opu_hal.testing) on a profile")
    p.add_argument("profile", help="profile path or name (a plugin's profile included)")
    p.add_argument("--only", action="append", default=None, metavar="CHECK",
                   help="run only this check, repeatable (default: all; names as printed)")
    add_json_option(p)
    p.set_defaults(func=_cmd_check)


def _add_run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sampling", choices=SAMPLINGS, default="poisson",
                   help="poisson (DP-SGD), fixed (without replacement, DP-DFA), rejection (DP-ULR) (default poisson)")
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

    p = sub.add_parser("plan", help="smallest noise multiplier for a target (epsilon, delta); with --profile, "
                                    "the device's operating points")
    _add_run_arguments(p)
    p.add_argument("--target-epsilon", type=float, required=True, help="target epsilon")
    p.add_argument("--sensitivity", type=float, default=None,
                   help="L2 sensitivity under the sampling's relation, to also print the noise std: poisson and "
                        "rejection: add/remove one example (C for a sum of per-example terms clipped to C); "
                        "fixed: replace one example (2C for the same sum)")
    device = p.add_argument_group("device mode (--profile)")
    device.add_argument("--profile", default=None, help="operating points of this profile (simulated OPU)")
    device.add_argument("--calibration", default=None,
                        help="calibration file, relative to the working directory (default: the profile's)")
    device.add_argument("--mechanism", choices=("gaussian", "skellam", "digitized"), default="gaussian",
                        help="how device noise is accounted (default gaussian; skellam: the lattice mechanism of "
                             "dp-dfa --noise-source device, with --sampling fixed; digitized: the same lattice with "
                             "digitized reads at any gain, calibration optional)")
    device.add_argument("--max-reads", type=int, default=4096,
                        help="digitized: most reads per count tried (default 4096)")
    device.add_argument("--dimension", type=int, default=None, help="skellam: the update's parameters d")
    device.add_argument("--lattice-resolution", type=float, default=None, help="skellam: lattice resolution k")
    device.add_argument("--rounding-analysis", choices=("per-coordinate", "worst-case"), default="per-coordinate",
                        help="skellam: how randomized rounding is accounted (default per-coordinate)")
    device.add_argument("--plot", default=None,
                        help="picture (PNG) of the plan, any mechanism, written whether or not a point reaches the "
                             "target: supplied noise against needed and camera time per operating point; digitized: "
                             "epsilon against reads per count; skellam per-coordinate: also print camera time against "
                             "noise over the lattice resolution and draw that")
    p.set_defaults(func=_cmd_plan, device_plan=_device_plan)


def _register_calibration_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="measure a device's camera noise (photon transfer) into a file")
    p.add_argument("profile", help="profile path or name")
    p.add_argument("--temperatures", type=float, nargs="+", default=None,
                   help="sensor temperatures, C (default: 5 across the profile's range)")
    p.add_argument("--exposures", type=float, nargs="+", default=None,
                   help="operating exposures, us (default: the profile's)")
    p.add_argument("--dark-exposures", type=float, nargs="+", default=[100_000.0, 1_000_000.0],
                   help="extra dark-frame exposures for dark current, us (default 1e5 1e6)")
    p.add_argument("--frames", type=int, default=32, help="frames per series (default 32)")
    p.add_argument("--out", required=True, help="calibration JSON to write (relative to the working directory)")
    p.add_argument("--plot", default=None, help="PNG to write (default: --out with .png)")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors (and the JSON with --json)")
    add_json_option(p, "print the calibration summary and the files written as JSON")
    run = p.add_argument_group("described run (adds an epsilon panel to the plot)")
    run.add_argument("--sampling", choices=SAMPLINGS, default="poisson",
                     help="minibatch sampling of the described run (default poisson)")
    run.add_argument("--dataset-size", type=int, default=None, help="training examples N (enables the panel)")
    run.add_argument("--batch-size", type=int, default=None, help="(expected) batch size m")
    run.add_argument("--epochs", type=float, default=None, help="epochs (default 1 when --steps is not given)")
    run.add_argument("--steps", type=int, default=None, help="training steps (instead of --epochs)")
    run.add_argument("--sensitivity", type=float, default=None, help="L2 sensitivity, output units")
    run.add_argument("--delta", type=float, default=1e-5, help="delta of the epsilon panel (default 1e-5)")
    p.set_defaults(func=_cmd_calibrate)


def build_parser(extra: Sequence[Register] = ()) -> argparse.ArgumentParser:
    """The ``opu-hal`` parser: device and privacy commands, the installed packages' commands
    (entry points) and any ``extra`` registrations (each registration runs once)."""
    parser = argparse.ArgumentParser(prog="opu-hal", description=__doc__.splitlines()[0].removeprefix("opu-hal: "))
    parser.add_argument("--version", action="version", version=f"opu-hal {__version__}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _register_device_commands(sub)
    _register_privacy_commands(sub)
    _register_calibration_commands(sub)
    registrations: list[Register] = []
    for register in [*installed_command_registrations(), *extra]:
        if register not in registrations:
            registrations.append(register)
    for register in registrations:
        apply_registration(sub, register)
    return parser


def apply_registration(sub: argparse._SubParsersAction, register: Register) -> bool:
    """Run one command registration; one that raises (sys.exit included) or adds a command name
    already taken is undone and skipped with a warning, so it cannot take the other commands down."""
    names, choices = dict(sub._name_parser_map), list(sub._choices_actions)
    where = f"command registration {getattr(register, '__module__', '?')}.{getattr(register, '__qualname__', register)}"
    try:
        register(sub)
    except PLUGIN_FAILURES as exc:
        problem = f"failed: {type(exc).__name__}: {exc}"
    else:
        replaced = [name for name, parser in names.items() if sub._name_parser_map.get(name) is not parser]
        if not replaced:
            return True
        problem = f"replaced the command(s) {', '.join(replaced)} that another registration added"
    sub._name_parser_map.clear()
    sub._name_parser_map.update(names)
    sub._choices_actions[:] = choices
    warnings.warn(f"{where} {problem}; its commands are ignored")
    return False


def command_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The subparser of ``command`` on the ``opu-hal`` parser."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


def parse_command_line(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse ``argv``; an unknown or misspelled option is refused by its command's parser (that
    command's usage and error, exit 2), not by the top-level one."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        command_parser(parser, args.command).error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def output_folder_problem(command: argparse.ArgumentParser, args: argparse.Namespace) -> str | None:
    """Why the command cannot start: an output file (``--out``, ``--plot``) in a missing folder."""
    from .runtime.output import OUTPUT_OPTIONS, missing_folder_problem

    for option in OUTPUT_OPTIONS:
        action = command._option_string_actions.get(option)
        value = getattr(args, action.dest, None) if action is not None else None
        if isinstance(value, str):
            problem = missing_folder_problem(option, value)
            if problem is not None:
                return problem
    return None


def run_command(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    """Parse and run a command; an :class:`OpuHalError` is printed (no traceback) and exits 2."""
    args = parse_command_line(parser, argv)
    problem = output_folder_problem(command_parser(parser, args.command), args)
    if problem is not None:
        print(f"opu-hal {args.command}: error: {problem}", file=sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except OpuHalError as exc:
        print(f"opu-hal {args.command}: error: {exc}", file=sys.stderr)
        return 2


def main(argv: Sequence[str] | None = None, extra: Sequence[Register] = ()) -> int:
    """Run a command (:func:`run_command`). A reader of stdout that goes away (``opu-hal devices
    --json | head``) ends it quietly with the status of a process killed by SIGPIPE (141)."""
    from .runtime.output import silence_stdout

    try:
        try:
            return run_command(build_parser(extra), argv)
        finally:  # within the try: a pipe closed before the last write is caught too (help included)
            sys.stdout.flush()
    except BrokenPipeError:
        return silence_stdout()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
