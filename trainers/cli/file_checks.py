"""Checks of the files a run names, done before the run's modules (torch, the accountant) are imported,
so that a mistyped path is answered at once. The run's own validation checks them again."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core.errors import TrainingConfigError


def check_named_files(args: argparse.Namespace) -> None:
    """Refuse a ``--profile`` that names no profile file (:class:`~opu_hal.contract.errors.ProfileError`,
    listing the known names) and a ``--calibration`` that is not a file."""
    from opu_hal.profiles.catalogue import resolve_profile_path  # pydantic: only when a command runs

    profile = getattr(args, "profile", None)
    if profile:
        resolve_profile_path(profile)
    calibration = getattr(args, "calibration", None)
    if calibration and not Path(calibration).is_file():
        raise TrainingConfigError(
            f"--calibration {calibration}: no such file (a calibration written by `opu-hal calibrate`, "
            "relative to the working directory)"
        )
