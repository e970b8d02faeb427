"""Map a privacy target to the operating points of a calibrated device.

Two mechanisms, one shape of answer (operating points that reach the target, ranked by cost in
frames and time, then by the noise the training sees; or, when none does, what would):

- ``gaussian`` (what the trainers ship today): the device's noise is accounted as Gaussian with
  the calibration's ``std_lower`` per projection; a point reaches the target when
  ``std_lower >= z * sensitivity``, ``z`` the smallest noise multiplier the accountant allows
  (:func:`opu_hal.privacy.inverse.smallest_noise_multiplier`). Mind DESIGN.md "Discrete noise".
- ``skellam`` (issue 12): the noise of a value is the difference of two sums of ``r`` anchor-only
  reads; with ``mu`` the per-value Poisson mean the target needs (``required_poisson_mean``, a
  parameter: the accountant of the Skellam mechanism plugs in here) and ``mu_read`` the
  calibration's worst-pixel lower bound of one read's electrons at the profile's anchor power
  (:meth:`.calibrated.CalibratedNoise.anchor_read_lower_e`, as ``train`` plans), ``r = ceil(mu / mu_read)``.

Operating points: calibrated temperatures x calibrated exposures at the profile's laser and anchor
power (a calibration measures one anchor power; more light never lowers a pixel's count, so a
brighter anchor is not credited without a calibration taken at that power).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..contract.anchor_map import AnchorBoundMap, drift_check_frames, select_pixels
from ..contract.errors import CalibrationError
from ..privacy.run_shape import RunShape
from .calibrated import CalibratedNoise
from .schema import Calibration

RequiredPoissonMean = Callable[[float, float, RunShape], float]
RequiredNoiseMultiplier = Callable[[float, float, RunShape], float]


@dataclass(frozen=True)
class OperatingPlan:
    temperature_c: float
    exposure_us: float
    laser_power_uw: float
    anchor_power_uw: float
    reaches_target: bool
    frames_per_step: int
    frames_total: int
    time_s: float
    noise_std: float  # output units (gaussian) or electrons (skellam), what training sees
    needed: float  # std_lower needed (gaussian) or Poisson mean per value needed (skellam)
    supplied: float  # std_lower (gaussian) or mu_read lower bound (skellam)
    reads_per_value: int = 1
    camera_seconds_per_step: float = 0.0
    noise_ratio: float = 1.0  # applied / accounted noise std (skellam: whole reads overshoot the mean needed)
    kept_pixels: int | None = None  # speckle anchor: the pixels whose calibrated bound the counts read
    frame_time_s: float | None = None  # the camera's frame period the time is priced at
    anchor_check_frames: int = 0  # speckle anchor: drift-check frames of the run (in frames_total, time_s)

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def _model(calibration: Calibration, profile, exposure_us: float, path: Path | None = None) -> CalibratedNoise:
    """The calibrated noise at ``exposure_us``; ``path``: the calibration's file (its anchor map beside it),
    else the profile's ``calibration`` key."""
    return CalibratedNoise(
        calibration,
        path if path is not None else Path(profile.calibration or "<calibration>"),
        profile.mode,
        exposure_us,
        profile.laser_power_uw,
        profile.anchor_power_uw,
    )


def plan_gaussian(
    calibration: Calibration,
    profile,
    target_epsilon: float,
    delta: float,
    shape: RunShape,
    required_noise_multiplier: RequiredNoiseMultiplier,
    path: Path | None = None,
) -> list[OperatingPlan]:
    """Every calibrated point, ranked; ``reaches_target`` where ``std_lower >= z * sensitivity``. ``path``:
    the calibration's file, whose anchor map bounds a speckle reference's brightest pixel."""
    z = required_noise_multiplier(target_epsilon, delta, shape)
    needed = z * shape.sensitivity
    frames_per_projection = 3 if profile.mode == "linear" else 1
    plans = []
    for exposure in calibration.exposures_us:
        model = _model(calibration, profile, exposure, path)
        for celsius in calibration.temperatures_c:
            report = model.report(celsius)
            per_step = frames_per_projection * shape.passes * shape.batch_size
            plans.append(
                OperatingPlan(
                    temperature_c=celsius,
                    exposure_us=exposure,
                    laser_power_uw=profile.laser_power_uw,
                    anchor_power_uw=profile.anchor_power_uw,
                    reaches_target=report.std_lower >= needed,
                    frames_per_step=per_step,
                    frames_total=per_step * shape.steps,
                    time_s=per_step * shape.steps * exposure * 1e-6,
                    noise_std=report.std,
                    needed=needed,
                    supplied=report.std_lower,
                )
            )
    return rank(plans)


def plan_skellam(
    calibration: Calibration,
    profile,
    target_epsilon: float,
    delta: float,
    shape: RunShape,
    required_poisson_mean: RequiredPoissonMean,
    anchor_map: AnchorBoundMap | None = None,
) -> list[OperatingPlan]:
    """Reads per value ``ceil(mu / mu_read)`` at every calibrated point, ranked by cost; with the
    ``anchor_map`` of a speckle anchor (measured at the profile's operating point), the reads, kept
    pixels and frames of :func:`~opu_hal.contract.anchor_map.select_pixels` there instead."""
    plans = []
    for exposure in calibration.exposures_us:
        model = _model(calibration, profile, exposure)
        model.check_unity_gain()  # unproven unity (flat beam or speckle): the digitized mechanism
        phi_up = model._electrons("signal")[1]
        a2_up = model._electrons("anchor")[1]
        electrons_per_unit = 2 * math.sqrt(a2_up) * math.sqrt(phi_up / 2) if profile.mode == "linear" else phi_up
        point_shape = dataclasses.replace(shape, sensitivity_e=shape.sensitivity * electrons_per_unit)
        mu = required_poisson_mean(target_epsilon, delta, point_shape)
        for op in calibration.operating_points:
            if op.exposure_us != exposure:
                continue
            # one read's lower bound at the profile's anchor power: the figure train plans its reads with
            mu_read, _ = model.anchor_read_lower_e(op.temperature_c)
            reads = math.ceil(mu / mu_read) if mu_read > 0 else 0
            if shape.dimension is not None:  # lattice mechanism: 2 counts per coordinate, a read per sensor pixel
                per_step = math.ceil(2 * reads * shape.dimension / profile.sensor_pixels)
            else:
                per_step = 2 * reads * shape.passes * shape.batch_size
            frame_s = max(getattr(profile, "frame_period_us", exposure), exposure) * 1e-6
            if anchor_map is not None:
                speckle = speckle_point(model, op, profile, anchor_map, mu, shape, frame_s)
                if speckle is not None:
                    plans.append(speckle)
                continue
            plans.append(
                OperatingPlan(
                    temperature_c=op.temperature_c,
                    exposure_us=exposure,
                    laser_power_uw=profile.laser_power_uw,
                    anchor_power_uw=profile.anchor_power_uw,
                    reaches_target=mu_read > 0,
                    frames_per_step=per_step,
                    frames_total=per_step * shape.steps,
                    time_s=per_step * shape.steps * frame_s,
                    camera_seconds_per_step=per_step * frame_s,
                    noise_ratio=math.sqrt(reads * mu_read / mu) if mu > 0 else 1.0,
                    noise_std=math.sqrt(
                        2
                        * reads
                        * (op.anchor_e.value * profile.anchor_power_uw / op.anchor_power_uw + max(op.dark_e.value, 0.0))
                    ),
                    needed=mu,
                    supplied=mu_read,
                    reads_per_value=reads,
                )
            )
    return rank(plans)


def speckle_point(
    model: CalibratedNoise, op, profile, anchor_map: AnchorBoundMap, mu: float, shape: RunShape, frame_s: float
) -> OperatingPlan | None:
    """The plan at the point ``anchor_map`` was measured at (None elsewhere: no map holds there)."""
    if (op.temperature_c, op.exposure_us) != (profile.temperature_c, profile.exposure_us):
        return None
    chosen = select_pixels(anchor_map, mu, model.clip_ceiling_e(), profile.speckle_max_overshoot)
    reads = chosen.reads_per_count
    values = shape.dimension if shape.dimension is not None else shape.passes * shape.batch_size
    per_step = chosen.frames(values)
    checks = drift_check_frames(shape.steps, profile.anchor_check_every)
    return OperatingPlan(
        temperature_c=op.temperature_c,
        exposure_us=op.exposure_us,
        laser_power_uw=profile.laser_power_uw,
        anchor_power_uw=profile.anchor_power_uw,
        reaches_target=True,
        frames_per_step=per_step,
        frames_total=per_step * shape.steps + checks,
        time_s=(per_step * shape.steps + checks) * frame_s,
        camera_seconds_per_step=per_step * frame_s,
        noise_ratio=math.sqrt(chosen.planned_mean / mu),
        noise_std=math.sqrt(2 * chosen.planned_mean),
        needed=mu,
        supplied=chosen.accounted_mean / reads,
        reads_per_value=reads,
        kept_pixels=chosen.kept_pixels,
        frame_time_s=frame_s,
        anchor_check_frames=checks,
    )


def rank(plans: list[OperatingPlan]) -> list[OperatingPlan]:
    """Points that reach the target first, cheapest (time, frames) first, then least noise."""
    return sorted(plans, key=lambda p: (not p.reaches_target, p.time_s, p.frames_total, p.noise_std))


def what_would(plans: list[OperatingPlan], calibration: Calibration) -> str:
    """When no point reaches the target: how far the best one is, and which knob moves it."""
    if not plans:
        raise CalibrationError("the calibration covers no operating point")
    best = max(plans, key=lambda p: p.supplied / p.needed if p.needed else math.inf)
    ratio = best.needed / best.supplied if best.supplied else math.inf
    return (
        f"no calibrated operating point reaches the target: the best, {best.temperature_c:g} C at "
        f"{best.exposure_us:g} us, supplies std_lower {best.supplied:.4g} where {best.needed:.4g} is needed "
        f"(x{ratio:.3g} short). More noise per projection needs a hotter sensor than the calibrated "
        f"{max(calibration.temperatures_c):g} C, a longer exposure with dimmer laser and anchor (then "
        "calibrate there), or a looser target (larger epsilon, fewer epochs, smaller sampling rate)"
    )
