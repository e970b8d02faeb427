"""``plan(..., mechanism="digitized")``: the reads per count of a calibrated device's digitized noise, as
``opu-hal plan --mechanism digitized`` finds them (:mod:`opu_hal.calibration.digitized_command`), returned
as an :class:`~opu_hal.calibration.plan.OperatingPlan` at the device's operating point."""

from __future__ import annotations

from pathlib import Path

from opu_hal.calibration.digitized_command import device_read_law, fewest_reads, speckle_check_frames
from opu_hal.calibration.plan import OperatingPlan
from opu_hal.contract.profile_base import BaseProfile
from opu_hal.privacy.digitized import MAX_READS
from opu_hal.privacy.run_shape import RunShape

from ..core.errors import TrainingConfigError


def plan_digitized(
    calibration: Path, profile: BaseProfile, target_epsilon: float, delta: float, shape: RunShape
) -> OperatingPlan:
    """The fewest digitized reads per count that reach ``target_epsilon`` on ``profile``'s device with the
    ``calibration`` file attached (a speckle anchor keeps its pixels for draws of ``shape.dimension``
    values), or :class:`TrainingConfigError` naming the reads tried."""
    if shape.rounding_analysis is None:
        raise TrainingConfigError("a digitized plan needs the run's rounding analysis")
    law = device_read_law(profile, calibration, int(shape.dimension or 0))
    lattice, found = fewest_reads(law, shape, target_epsilon, delta, MAX_READS, [], shape.rounding_analysis)
    if found is None:
        raise TrainingConfigError(
            f"{profile.label}: no number of digitized reads up to {lattice.max_reads} reaches epsilon "
            f"{target_epsilon} at delta {delta} for this run (d = {shape.dimension}, {shape.steps} steps)"
        )
    reads, epsilon = found
    frames = law.frames(int(shape.dimension or 0), reads)
    checks = speckle_check_frames(profile, law, shape.steps)
    return OperatingPlan(
        temperature_c=float(getattr(profile, "temperature_c", 25.0)),
        exposure_us=float(getattr(profile, "exposure_us", 0.0)),
        laser_power_uw=float(getattr(profile, "laser_power_uw", 0.0)),
        anchor_power_uw=float(getattr(profile, "anchor_power_uw", 0.0) or 0.0),
        reaches_target=True,
        frames_per_step=frames,
        frames_total=frames * shape.steps + checks,
        time_s=(frames * shape.steps + checks) * law.frame_time_s,
        noise_std=float(lattice.noise_std(reads)),
        needed=target_epsilon,
        supplied=epsilon,
        reads_per_value=reads,
        camera_seconds_per_step=frames * law.frame_time_s,
        kept_pixels=law.kept_pixels,
        frame_time_s=law.frame_time_s,
        anchor_check_frames=checks,
    )
