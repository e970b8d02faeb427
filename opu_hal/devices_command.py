"""The work of ``opu-hal devices``: the profiles of a folder with backend and sizes. It reads and
validates TOML profiles only (pydantic), so it answers without importing torch, numpy or a backend."""

from __future__ import annotations

import argparse
from pathlib import Path

from .contract.errors import OpuHalError, ProfileError
from .profiles.catalogue import list_profiles, load_profile, looks_like_profile
from .runtime.output import print_json


def cmd_devices(args: argparse.Namespace) -> int:
    """``opu-hal devices``: every profile of the folder (files that look like profiles: a TOML table
    with a ``backend`` or ``schema`` key, or a file that does not parse) with backend and sizes."""
    paths = [p for p in list_profiles(args.dir) if looks_like_profile(p)]
    if not paths:
        raise ProfileError(
            f"--dir {args.dir or 'the packaged profiles'}: no profiles (*.toml with a 'backend' key) found there"
        )
    rows = []
    for path in paths:
        try:
            profile = load_profile(path)
            rows.append(
                {
                    "profile": path.stem,
                    "path": str(path),
                    "backend": profile.backend,
                    "valid": True,
                    "in_features": profile.in_features,
                    "out_features": profile.out_features,
                    "description": profile.description,
                    "calibration": _calibration(profile),
                }
            )
        except OpuHalError as exc:  # PrivacyParameterError included (a subclass)
            rows.append(
                {
                    "profile": path.stem,
                    "path": str(path),
                    "backend": None,
                    "valid": False,
                    "in_features": None,
                    "out_features": None,
                    "description": str(exc).splitlines()[0],
                    "calibration": None,
                }
            )
    if args.json:
        print_json(rows)
        return 0
    table = [
        (
            r["profile"],
            r["backend"] or "INVALID",
            f"{r['in_features']}->{r['out_features']}" if r["valid"] else "",
            f"{r['description']}{_calibration_note(r['calibration'])}",
        )
        for r in rows
    ]
    widths = [max(len(str(r[i])) for r in table + [("profile", "backend", "size", "")]) for i in range(3)]
    print(f"{'profile':<{widths[0]}}  {'backend':<{widths[1]}}  {'size':<{widths[2]}}  description")
    for row in table:
        print(f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:<{widths[2]}}  {row[3]}")
    return 0


def _calibration(profile) -> dict[str, object] | None:
    """The calibration file a profile names (key ``calibration``, relative to the profile file) and
    whether it is there; None when it names none."""
    if profile.calibration is None:
        return None
    path = Path(profile.calibration)
    if not path.is_absolute() and profile.source is not None:
        path = Path(profile.source).parent / path
    return {"path": str(path), "found": path.is_file()}


def _calibration_note(calibration: object) -> str:
    """The table's note of a row's calibration (a dict of :func:`_calibration`), empty without one."""
    if not isinstance(calibration, dict):
        return ""
    return f" [calibration {calibration['path']}{'' if calibration['found'] else ': missing'}]"
