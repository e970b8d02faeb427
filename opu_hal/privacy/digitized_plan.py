"""Planner for digitized-read device noise: does a camera give a sound operating point, and at what cost?

For a camera (bits, gain, black level, read noise, full well) and a DP-DFA run (fixed-size batches,
per-coordinate lattice ``gamma Delta = k``), try anchor levels whose mean read sits at
``levels`` of the ADC's span above black, and at each the fewest reads per count whose
:class:`.digitized_events.FixedSizeDigitizedNoiseEvent` over ``steps`` reaches the target (epsilon
falls with the reads; bisection, then the found count is re-checked by the accountant). Cost as
:func:`opu_hal.backends.simulated.privacy_noise.camera_cost`: ``2 reads d`` reads per step, one per
pixel of a frame. A camera with no level and no reads ``<= MAX_READS`` that fits is refused with the
reason and the nearest camera (bit depth, then gain) that qualifies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .accountant import Accountant
from .digitized import MAX_READS, CameraRead
from .digitized_events import FixedSizeDigitizedNoiseEvent
from .events import PrivacyParameterError

DEFAULT_LEVELS = (0.35, 0.5, 0.65)


class DigitizedPlanRefused(PrivacyParameterError):
    """No sound operating point on this camera; the message names why and what would qualify."""


@dataclass(frozen=True)
class CameraFacts:
    """Fixed camera facts at the low ends of their calibrated intervals (``read_noise_e``)."""

    read_noise_e: float
    gain_e_per_dn: float
    adc_bits: int
    black_level_dn: int
    full_well_e: float

    def at_level(self, level: float) -> CameraRead:
        """The camera with its anchor read's mean at ``level`` of the span from black to the top."""
        top_e = min(self.full_well_e, (2**self.adc_bits - 1 - self.black_level_dn) * self.gain_e_per_dn)
        return CameraRead(
            level * top_e, self.read_noise_e, self.gain_e_per_dn, self.adc_bits, self.black_level_dn, self.full_well_e
        )


@dataclass(frozen=True)
class RunShape:
    dataset_size: int
    batch_size: int
    steps: int
    dimension: int
    resolution: float
    target_epsilon: float
    delta: float


@dataclass(frozen=True)
class DigitizedPlan:
    camera: CameraRead
    reads: int
    epsilon: float
    frames_per_step: int
    camera_seconds: float


def _epsilon(camera: CameraRead, reads: int, run: RunShape) -> float:
    event = FixedSizeDigitizedNoiseEvent(
        camera.mean_e,
        camera.read_noise_e,
        camera.gain_e_per_dn,
        camera.adc_bits,
        camera.black_level_dn,
        camera.full_well_e,
        reads,
        run.resolution,
        run.dimension,
        dataset_size=run.dataset_size,
        batch_size=run.batch_size,
    )
    accountant = Accountant("replace_one")
    accountant.step(event, run.steps)
    return accountant.get_epsilon(run.delta)


def fewest_reads(camera: CameraRead, run: RunShape, max_reads: int = MAX_READS) -> tuple[int, float] | None:
    """Fewest reads per count reaching the target, and its epsilon; None if ``max_reads`` does not."""
    if _epsilon(camera, max_reads, run) > run.target_epsilon:
        return None
    low, high = 0, max_reads  # epsilon(high) fits; low does not (or is 0)
    while high - low > 1:
        middle = (low + high) // 2
        if _epsilon(camera, middle, run) <= run.target_epsilon:
            high = middle
        else:
            low = middle
    return high, _epsilon(camera, high, run)


def plan(
    facts: CameraFacts,
    run: RunShape,
    pixels_per_frame: int,
    frame_time_s: float,
    levels: tuple[float, ...] = DEFAULT_LEVELS,
    max_reads: int = MAX_READS,
) -> DigitizedPlan:
    """The cheapest sound operating point (module docstring), or :class:`DigitizedPlanRefused`;
    ``max_reads`` (at most :data:`MAX_READS`) caps the reads per count tried."""
    if not (isinstance(max_reads, int) and 1 <= max_reads <= MAX_READS):
        raise PrivacyParameterError(f"max_reads must be an integer in [1, {MAX_READS}], got {max_reads!r}")
    best: DigitizedPlan | None = None
    for level in levels:
        camera = facts.at_level(level)
        found = fewest_reads(camera, run, max_reads)
        if found is None:
            continue
        reads, epsilon = found
        frames = math.ceil(2 * reads * run.dimension / pixels_per_frame)
        candidate = DigitizedPlan(camera, reads, epsilon, frames, frames * frame_time_s * run.steps)
        if best is None or candidate.reads < best.reads:
            best = candidate
    if best is not None:
        return best
    raise DigitizedPlanRefused(
        f"no anchor level at {', '.join(f'{x:.0%}' for x in levels)} of the ADC span reaches epsilon "
        f"{run.target_epsilon} at delta {run.delta} with at most {max_reads} reads per count on a "
        f"{facts.adc_bits}-bit camera at {facts.gain_e_per_dn} e-/DN (black {facts.black_level_dn} DN, read noise "
        f"{facts.read_noise_e} e-); nearest that qualifies: {nearest_camera(facts, run, levels, max_reads)}"
    )


def nearest_camera(
    facts: CameraFacts, run: RunShape, levels: tuple[float, ...] = DEFAULT_LEVELS, max_reads: int = MAX_READS
) -> str:
    """The first of: more bits at the same gain, then a larger gain (more electrons per read), that plans."""
    options = [replace(facts, adc_bits=bits) for bits in range(facts.adc_bits + 2, 17, 2)]
    options += [replace(facts, gain_e_per_dn=facts.gain_e_per_dn * f) for f in (2, 4, 8, 16)]
    for option in options:
        for level in levels:
            found = fewest_reads(option.at_level(level), run, max_reads)
            if found is not None:
                return (
                    f"{option.adc_bits}-bit at {option.gain_e_per_dn} e-/DN ({found[0]} reads per count at "
                    f"{level:.0%} of the span)"
                )
    return "none up to 16 bits or 16x the gain: loosen the target or shorten the run"
