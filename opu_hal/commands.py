"""The device commands' work (``info``, ``noise``, ``project``, ``check``; ``devices`` is
:mod:`.devices_command`); the parser that names them is :mod:`opu_hal.cli`, which imports this module
only when one of them runs."""

from __future__ import annotations

import argparse
import math

import torch

from .contract.errors import InputError
from .loader import load_device
from .profiles.catalogue import load_profile
from .runtime.memory import available_bytes, batch_limit, gib, row_bytes
from .runtime.output import print_json


def describe_device(profile_source: str) -> dict[str, dict[str, object]]:
    """The validated profile, the device's capabilities and its current noise, as one dict."""
    profile = load_profile(profile_source)
    with load_device(profile) as device:
        return {
            "profile": {"source": str(profile.source), **profile.model_dump()},
            "capabilities": device.capabilities.to_dict(),
            "noise": {**device.noise_report().to_dict(), "calibration": _calibration_file(device)},
        }


def _calibration_file(device) -> str | None:
    """The file the device's noise is calibrated from (None: its declared model, or none is known)."""
    path = getattr(device.calibration, "path", None)
    return None if path is None else str(path)


def cmd_info(args: argparse.Namespace) -> int:
    info = describe_device(args.profile)
    if args.json:
        print_json(info)
        return 0
    for section, content in info.items():
        print(f"[{section}]")
        for key, value in content.items():
            print(f"  {key:<22} {value}")
    return 0


MAX_NOISE_POINTS = 1000
PROJECT_PEAK_FACTOR = 12  # the simulated OPU peaks near 12x its output (frames, fields, matrix tile)


def check_project_batch(batch: int, in_features: int, out_features: int) -> None:
    """Refuse ``project --batch`` outside [1, what fits in the host's available memory]."""
    if batch < 1 or batch * row_bytes(in_features, out_features, PROJECT_PEAK_FACTOR) > available_bytes() // 2:
        most = batch_limit(in_features, out_features, PROJECT_PEAK_FACTOR)
        raise InputError(
            f"--batch must be in [1, {most}] for this device and host memory "
            f"({gib(available_bytes())} available), got {batch}"
        )


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
            "in_features / out_features, or raise --max-seconds"
        )


def cmd_project(args: argparse.Namespace) -> int:
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
        print_json(result)
    else:
        print(f"profile {result['profile']} (backend {result['backend']})")
        print(f"input  {tuple(shape)} {kind}")
        print(
            f"values {tuple(projection.values.shape)}  mean {result['values_mean']:.4g}  std {result['values_std']:.4g}"
        )
        noise = projection.noise
        print(
            f"noise  std {noise.std:.6g}  std_lower {noise.std_lower:.6g}  source {noise.source}  "
            f"temperature_c {noise.temperature_c}  exposure_us {noise.exposure_us}"
        )
    return 0


def cmd_noise(args: argparse.Namespace) -> int:
    if not 1 <= args.points <= MAX_NOISE_POINTS:
        raise InputError(f"--points must be in [1, {MAX_NOISE_POINTS}], got {args.points}")
    device = load_device(args.profile)
    if not device.capabilities.temperature_settable:
        if args.json:
            print_json(device.noise_report().to_dict())
        else:
            print(device.noise_report())
        return 0
    profile = device.profile
    low = profile.temperature_min_c if args.min is None else args.min
    high = profile.temperature_max_c if args.max is None else args.max
    rows = []
    for i in range(args.points):
        celsius = low + (high - low) * i / max(1, args.points - 1)
        device.set_options(temperature_c=celsius)
        report = device.noise_report()
        rows.append(
            {
                "temperature_c": celsius,
                "std": report.std,
                "std_lower": report.std_lower,
                "dark_e": report.details.get("dark_e"),
            }
        )
    if args.json:
        print_json(rows)
        return 0
    print(f"{profile.label}: noise of an input with half the mirrors on (output units)")
    print(f"{'T (C)':>7} {'dark (e-)':>10} {'std':>8} {'std_lower':>10}")
    for row in rows:
        print(f"{row['temperature_c']:7.1f} {row['dark_e']:10.1f} {row['std']:8.4f} {row['std_lower']:10.4f}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """``opu-hal check PROFILE``: the conformance suite (:mod:`opu_hal.testing`), one line per check;
    exit 1 when a check fails (like PennyLane's ``pl-device-test``)."""
    from .testing import run_checks

    outcomes = run_checks(args.profile, only=args.only)
    failed = [name for name, (status, _) in outcomes.items() if status == "failed"]
    if args.json:
        print_json(
            {
                "profile": args.profile,
                "checks": {name: {"status": status, "detail": detail} for name, (status, detail) in outcomes.items()},
                "passed": not failed,
            }
        )
    else:
        for name, (status, detail) in outcomes.items():
            print(f"{status:<15} {name}" + (f": {detail}" if detail else ""))
        print(
            f"{args.profile}: {len(outcomes) - len(failed)} of {len(outcomes)} checks passed or not applicable"
            + (f"; FAILED: {', '.join(failed)}" if failed else "")
        )
    return 1 if failed else 0
