"""``opu-hal``: list and inspect device profiles, project a batch, account for privacy.

Commands register themselves on one argparse parser. Other packages add theirs through the
entry-point group ``opu_hal.commands`` (a callable taking the subparsers object); the trainers
package registers ``train``, ``plot`` and ``table`` that way, so opu_hal never imports trainers.
``main``'s ``extra`` hook registers commands in-process (``python -m trainers.cli`` uses it, which
also covers an install whose entry-point metadata predates the group).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from importlib import metadata
from pathlib import Path
from typing import Callable, Sequence

import torch

from .calibration.commands import register_calibration_commands
from .contract.errors import InputError, OpuHalError, ProfileError
from .loader import load_device
from .runtime.memory import available_bytes, gib
from .privacy.commands import register_privacy_commands
from .privacy.events import PrivacyParameterError
from .profiles.catalogue import list_profiles, load_profile
from .profiles.registry import PLUGIN_FAILURES

Register = Callable[[argparse._SubParsersAction], None]
COMMANDS_ENTRY_POINT_GROUP = "opu_hal.commands"


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


def _cmd_devices(args: argparse.Namespace) -> int:
    paths = list_profiles(args.dir)
    if not paths:
        raise ProfileError(f"--dir {args.dir or 'device_profiles/'}: no profiles (*.toml) found there")
    rows = []
    for path in paths:
        try:
            profile = load_profile(path)
            rows.append((path.stem, profile.backend, f"{profile.in_features}->{profile.out_features}",
                         profile.description))
        except (OpuHalError, PrivacyParameterError) as exc:
            rows.append((path.stem, "INVALID", "", str(exc).splitlines()[0]))
    widths = [max(len(str(r[i])) for r in rows + [("profile", "backend", "size", "")]) for i in range(3)]
    print(f"{'profile':<{widths[0]}}  {'backend':<{widths[1]}}  {'size':<{widths[2]}}  description")
    for row in rows:
        print(f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:<{widths[2]}}  {row[3]}")
    return 0


def describe_device(profile_source: str) -> dict[str, object]:
    """The validated profile, the device's capabilities and its current noise, as one dict."""
    profile = load_profile(profile_source)
    with load_device(profile) as device:
        return {
            "profile": {"source": str(profile.source), **profile.model_dump()},
            "capabilities": device.capabilities.to_dict(),
            "noise": device.noise_report().to_dict(),
        }


def _cmd_info(args: argparse.Namespace) -> int:
    info = describe_device(args.profile)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    for section, content in info.items():
        print(f"[{section}]")
        for key, value in content.items():  # type: ignore[union-attr]
            print(f"  {key:<22} {value}")
    return 0


MAX_NOISE_POINTS = 1000
PROJECT_PEAK_FACTOR = 12  # the simulated OPU peaks near 12x its output (frames, fields, matrix tile)


def check_project_batch(batch: int, in_features: int, out_features: int) -> None:
    """Refuse ``project --batch`` outside [1, what fits in the host's available memory]."""
    need = PROJECT_PEAK_FACTOR * 4 * batch * (in_features + out_features)
    if batch < 1 or need > available_bytes() // 2:
        most = max(1, available_bytes() // 2 // (PROJECT_PEAK_FACTOR * 4 * (in_features + out_features)))
        raise InputError(f"--batch must be in [1, {most}] for this device and host memory "
                         f"({gib(available_bytes())} available), got {batch}")


MAX_SEED = 2**63 - 1


def check_project_time(device, max_seconds: float) -> None:
    """Refuse, before projecting, a device whose matrix takes longer than ``max_seconds`` to
    generate (a simulated OPU regenerates it per projection unless it fits in cache_mb)."""
    optics = getattr(device, "optics", None)
    if optics is None or not hasattr(optics, "generation_seconds"):
        return
    seconds = optics.generation_seconds()
    if seconds > max_seconds:
        raise InputError(
            f"profile {device.profile.label!r}: its {optics.in_features} x {optics.out_features} matrix takes about "
            f"{seconds:.3g} s to generate on this host, over --max-seconds {max_seconds:g}: use smaller "
            "in_features / out_features, or raise --max-seconds")


def _cmd_project(args: argparse.Namespace) -> int:
    if not 0 <= args.seed <= MAX_SEED:
        raise InputError(f"--seed must be in [0, 2^63 - 1], got {args.seed}")
    if not (math.isfinite(args.max_seconds) and args.max_seconds > 0):
        raise InputError(f"--max-seconds must be finite and > 0, got {args.max_seconds}")
    profile = load_profile(args.profile)
    check_project_batch(args.batch, profile.in_features, profile.out_features)
    with load_device(profile) as device:
        check_project_time(device, args.max_seconds)
        generator = torch.Generator().manual_seed(args.seed)
        kind = device.capabilities.input_kind
        shape = (args.batch, device.in_features)
        if kind == "real":
            x = torch.randn(shape, generator=generator)
        else:
            low = -1 if kind == "ternary" else 0
            x = torch.randint(low, 2, shape, generator=generator).float()
        projection = device.project(x)
        result = {
            "profile": profile.label,
            "backend": profile.backend,
            "input_shape": list(shape),
            "input_kind": kind,
            "values_shape": list(projection.values.shape),
            "values_mean": float(projection.values.mean()),
            "values_std": float(projection.values.std()),
            "noise": projection.noise.to_dict(),
        }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"profile {result['profile']} (backend {result['backend']})")
        print(f"input  {tuple(shape)} {kind}")
        print(f"values {tuple(projection.values.shape)}  mean {result['values_mean']:.4g}  "
              f"std {result['values_std']:.4g}")
        noise = projection.noise
        print(f"noise  std {noise.std:.6g}  std_lower {noise.std_lower:.6g}  source {noise.source}  "
              f"temperature_c {noise.temperature_c}  exposure_us {noise.exposure_us}")
    return 0


def _cmd_noise(args: argparse.Namespace) -> int:
    if not 1 <= args.points <= MAX_NOISE_POINTS:
        raise InputError(f"--points must be in [1, {MAX_NOISE_POINTS}], got {args.points}")
    device = load_device(args.profile)
    if not device.capabilities.temperature_settable:
        print(json.dumps(device.noise_report().to_dict()) if args.json else device.noise_report())
        return 0
    profile = device.profile
    low = profile.temperature_min_c if args.min is None else args.min
    high = profile.temperature_max_c if args.max is None else args.max
    rows = []
    for i in range(args.points):
        celsius = low + (high - low) * i / max(1, args.points - 1)
        device.set_options(temperature_c=celsius)
        report = device.noise_report()
        rows.append({"temperature_c": celsius, "std": report.std, "std_lower": report.std_lower,
                     "dark_e": report.details.get("dark_e")})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{profile.label}: noise of an input with half the mirrors on (output units)")
    print(f"{'T (C)':>7} {'dark (e-)':>10} {'std':>8} {'std_lower':>10}")
    for row in rows:
        print(f"{row['temperature_c']:7.1f} {row['dark_e']:10.1f} {row['std']:8.4f} {row['std_lower']:10.4f}")
    return 0


def _register_device_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("devices", help="list the profiles with backend and sizes")
    p.add_argument("--dir", default=None, help="profile folder (default: device_profiles/)")
    p.set_defaults(func=_cmd_devices)

    p = sub.add_parser("info", help="print one validated profile and the device's capabilities")
    p.add_argument("profile", help="profile path or name")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_info)

    p = sub.add_parser("noise", help="noise report against sensor temperature")
    p.add_argument("profile", help="profile path or name")
    p.add_argument("--min", type=float, default=None, help="lowest temperature, C (profile's)")
    p.add_argument("--max", type=float, default=None, help="highest temperature, C (profile's)")
    p.add_argument("--points", type=int, default=9, help="temperatures in the sweep")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_noise)

    p = sub.add_parser("project", help="project a random batch and print the noise report")
    p.add_argument("profile", help="profile path or name")
    p.add_argument("--batch", type=int, default=8, help="rows in the batch (default 8)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random batch, in [0, 2^63 - 1]")
    p.add_argument("--max-seconds", type=float, default=60.0,
                   help="refuse a device whose matrix would take longer to generate (default 60)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_project)


def build_parser(extra: Sequence[Register] = ()) -> argparse.ArgumentParser:
    """The ``opu-hal`` parser: device and privacy commands, the installed packages' commands
    (entry points) and any ``extra`` registrations (each registration runs once)."""
    parser = argparse.ArgumentParser(prog="opu-hal", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _register_device_commands(sub)
    register_privacy_commands(sub)
    register_calibration_commands(sub)
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


def main(argv: Sequence[str] | None = None, extra: Sequence[Register] = ()) -> int:
    """Run a command; an :class:`OpuHalError` is printed (no traceback) and exits 2."""
    args = build_parser(extra).parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (OpuHalError, PrivacyParameterError) as exc:
        print(f"opu-hal {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
