"""Checks the ``opu-hal calibrate`` and ``opu-hal plan --profile`` commands share: the profile declares
a camera model, option values are distinct, output paths are writable, and the run shape of the flags."""

from __future__ import annotations

import argparse
from typing import Any

from ..contract.errors import CalibrationError
from ..privacy.events import PrivacyParameterError
from ..privacy.run_shape import RunShape, as_flags, steps_for
from ..runtime.paths import unwritable_reason

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


def check_distinct(values: list[float] | None, option: str) -> None:
    if values is not None and len(set(values)) != len(values):
        raise CalibrationError(
            f"{option} must be distinct values (each is one calibrated point), got {' '.join(f'{v:g}' for v in values)}"
        )


def check_output(path: str | None, option: str) -> None:
    """Refuse, before measuring, an output path that could not be written afterwards."""
    if path is None:
        return
    reason = unwritable_reason(path)
    if reason is not None:
        raise CalibrationError(f"{option} {path}: not a writable file path ({reason})")


def shape_from_args(args: argparse.Namespace) -> RunShape:
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
