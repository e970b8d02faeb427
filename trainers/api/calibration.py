"""Calibrating a device and planning a private run from Python: thin wrappers of
:func:`opu_hal.calibration.run.calibrate_device` and :mod:`opu_hal.calibration.plan` (the same code
``opu-hal calibrate`` and ``opu-hal plan`` run).

>>> from trainers.api import calibrate, calibrated_device, plan
>>> cal = calibrate("opu-sim-dp", temperatures=[20.0, 30.0], frames=8, bootstrap=50,
...                 out="cal.json")                                        # doctest: +SKIP
>>> points = plan(cal, "opu-sim-dp", target_epsilon=3.0, delta=1e-5, dataset_size=60000,
...               batch_size=128, epochs=5, dimension=36_000)              # doctest: +SKIP
>>> device = calibrated_device("opu-sim-dp", "cal.json")                   # doctest: +SKIP

``device`` then draws privacy noise with reads planned from the calibration's lower bound (pass
it to ``PrivacyEngine.make_private(..., noise_source="device", device=device)``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torch import nn

from opu_hal import Device, load_device
from opu_hal.calibration.anchor_map import calibrate_anchor_map
from opu_hal.calibration.calibrate_command import default_temperatures
from opu_hal.calibration.command_args import require_camera_profile
from opu_hal.calibration.frames import check_frames_fit
from opu_hal.calibration.identity import check_profile
from opu_hal.calibration.plan import OperatingPlan, plan_gaussian, plan_skellam
from opu_hal.calibration.plan_command import gaussian_noise_multiplier
from opu_hal.calibration.run import DEFAULT_BOOTSTRAP, DEFAULT_FRAMES, calibrate_device
from opu_hal.calibration.schema import Calibration, read_calibration, write_calibration
from opu_hal.contract.profile_base import BaseProfile
from opu_hal.privacy.run_shape import RunShape, Sampling
from opu_hal.privacy.skellam import required_poisson_mean
from opu_hal.profiles.catalogue import load_profile

from ..core.errors import TrainingConfigError
from .validation import check_calibrate, check_plan

PathLike = str | os.PathLike[str]


def _uncalibrated_profile(profile: PathLike) -> BaseProfile:
    """The profile with its ``calibration`` key removed (a calibration measures the bare device)."""
    loaded = load_profile(profile)
    return loaded.model_copy(update={"calibration": None}) if loaded.calibration is not None else loaded


def calibrate(
    device: Device[Any] | PathLike,
    temperatures: Sequence[float] | None = None,
    exposures: Sequence[float] | None = None,
    dark_exposures: Sequence[float] | None = None,
    frames: int = DEFAULT_FRAMES,
    *,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
    out: PathLike | None = None,
) -> Calibration:
    """Measure ``device`` (a device, or a profile name or path) and return its calibration; write
    it to ``out`` as JSON if given. Defaults as ``opu-hal calibrate``: five temperatures across
    the profile's range, the profile's exposure; dark frames (two exposures at least, for dark
    current and black level) at 1x and 10x the profile's exposure. Arguments are checked, and ``out``
    probed, before the device is measured (as ``opu-hal calibrate``)."""
    check_calibrate(locals())
    bare = device.profile if isinstance(device, Device) else _uncalibrated_profile(device)
    require_camera_profile(bare, "calibrate")
    check_frames_fit(frames, bare.out_features)
    opened = device if isinstance(device, Device) else load_device(bare)
    profile = opened.profile
    temps = list(temperatures) if temperatures is not None else default_temperatures(profile)
    exps = list(exposures) if exposures is not None else [profile.exposure_us]
    darks = list(dark_exposures) if dark_exposures is not None else [profile.exposure_us, 10 * profile.exposure_us]
    calibration = calibrate_device(opened, temps, exps, darks, frames, bootstrap=bootstrap, seed=seed)
    if out is not None:
        written = write_calibration(calibration, out)
        calibrate_anchor_map(opened, calibration, Path(written))  # a speckle anchor's per-pixel map, as the CLI
    return calibration


def calibrated_device(profile: PathLike, calibration: PathLike) -> Device[Any]:
    """Open ``profile`` with its ``calibration`` key set to the file ``calibration`` (the device
    checks that the file was taken on it and bounds its noise by the calibration)."""
    loaded = load_profile(profile).model_copy(update={"calibration": str(Path(calibration).resolve())})
    return load_device(loaded)


def plan(
    calibration: Calibration | PathLike,
    profile: PathLike,
    target_epsilon: float,
    delta: float,
    *,
    dataset_size: int,
    batch_size: int,
    epochs: float | None = None,
    steps: int | None = None,
    mechanism: str = "skellam",
    model: nn.Module | None = None,
    dimension: int | None = None,
    lattice_resolution: float = 10.0,
    rounding_analysis: str = "per-coordinate",
    sampling: Sampling = "fixed",
    sensitivity: float | None = None,
) -> list[OperatingPlan]:
    """Operating points of the calibrated device for the target, ranked (those that reach it first,
    cheapest first), as ``opu-hal plan``.

    ``mechanism="skellam"``: dp-dfa's lattice mechanism with device noise; the update's dimension
    is ``dimension`` or ``model``'s parameter count (a calibration that does not prove unity gain is
    refused). ``mechanism="digitized"``: the same lattice with digitized reads accounted from the
    calibration's intervals (any gain; one plan, at the device's operating point). ``mechanism="gaussian"``: device noise
    accounted as Gaussian, needs ``sensitivity`` (output units). ``steps`` defaults to
    ``ceil(epochs * dataset_size / batch_size)``. The calibration must have been taken on the
    device ``profile`` describes (as ``opu-hal plan --profile`` checks).
    """
    steps = check_plan(locals())
    cal = calibration if isinstance(calibration, Calibration) else read_calibration(calibration)
    loaded = load_profile(profile)
    require_camera_profile(loaded, "plan")
    source = Path("<calibration>") if isinstance(calibration, Calibration) else Path(calibration)
    check_profile(cal, loaded, source)
    if mechanism in ("skellam", "digitized"):
        if dimension is None and model is not None:
            dimension = sum(p.numel() for p in model.parameters() if p.requires_grad)
        if dimension is None:
            raise TrainingConfigError(f"plan(mechanism={mechanism!r}) needs model= or dimension= (the update's size)")
        shape = RunShape(
            sampling=sampling,
            dataset_size=dataset_size,
            batch_size=batch_size,
            steps=steps,
            sensitivity=sensitivity or 1.0,
            dimension=dimension,
            lattice_resolution=lattice_resolution,
            rounding_analysis=rounding_analysis,
        )
        if mechanism == "digitized":
            if isinstance(calibration, Calibration):
                raise TrainingConfigError(
                    "plan(mechanism='digitized') needs the calibration's file (the device reads it)"
                )
            from .digitized_plan import plan_digitized

            return [plan_digitized(Path(calibration), loaded, target_epsilon, delta, shape)]
        return plan_skellam(cal, loaded, target_epsilon, delta, shape, required_poisson_mean)
    if mechanism == "gaussian":
        if sensitivity is None or not sensitivity > 0:
            raise TrainingConfigError("plan(mechanism='gaussian') needs sensitivity > 0 (output units)")
        shape = RunShape(
            sampling=sampling, dataset_size=dataset_size, batch_size=batch_size, steps=steps, sensitivity=sensitivity
        )
        path = None if isinstance(calibration, Calibration) else Path(calibration)
        return plan_gaussian(cal, loaded, target_epsilon, delta, shape, gaussian_noise_multiplier, path)
    raise TrainingConfigError(f"mechanism {mechanism!r}: choose 'skellam', 'digitized' or 'gaussian'")
