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
from collections.abc import Callable, Sequence
from importlib import metadata

from .builtin_commands import SAMPLINGS, register_builtin_commands
from .contract.errors import OpuHalError
from .contract.version import __version__
from .runtime.output import add_json_option

__all__ = ["SAMPLINGS", "add_json_option", "build_parser", "main"]

Register = Callable[[argparse._SubParsersAction], None]
COMMANDS_ENTRY_POINT_GROUP = "opu_hal.commands"
#: What a plugin's import may raise without taking the other commands down (as in opu_hal.profiles.registry).
PLUGIN_FAILURES = (Exception, SystemExit, KeyboardInterrupt)


def installed_command_registrations() -> list[Register]:
    """The command registrations other installed packages declare (entry-point group
    ``opu_hal.commands``); a broken one is skipped with a warning."""
    found: list[Register] = []
    for entry in metadata.entry_points(group=COMMANDS_ENTRY_POINT_GROUP):
        try:
            register = entry.load()
        except PLUGIN_FAILURES as exc:  # a broken plugin must not take the device commands down
            warnings.warn(
                f"command entry point {entry.name!r} ({entry.value}) failed to load: {type(exc).__name__}: {exc}"
            )
            continue
        if callable(register):
            found.append(register)
        else:
            warnings.warn(f"command entry point {entry.name!r} ({entry.value}) is not callable; ignored")
    return found


def build_parser(extra: Sequence[Register] = ()) -> argparse.ArgumentParser:
    """The ``opu-hal`` parser: device and privacy commands, the installed packages' commands
    (entry points) and any ``extra`` registrations (each registration runs once)."""
    parser = argparse.ArgumentParser(prog="opu-hal", description=__doc__.splitlines()[0].removeprefix("opu-hal: "))
    parser.add_argument(
        "--version", action="version", version=f"opu-hal {__version__}", help="print the version and exit"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    register_builtin_commands(sub)
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
