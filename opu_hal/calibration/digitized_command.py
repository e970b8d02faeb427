"""``opu-hal plan --profile P --mechanism digitized``: reads per count of digitized device noise.

The profile's device (with its calibration, when one is given or named: then the calibrated box of
:mod:`opu_hal.privacy.digitized_box`) supplies the law of one anchor-only read; the run shape gives
``d``, ``k``, the batch and the steps. Prints the fewest reads per count that reach the target
(:func:`opu_hal.privacy.digitized_lattice.fewest_box_reads`), its epsilon, the frames and
camera-seconds; or the refusal, with the anchor level or the nearest camera that would qualify
(:func:`opu_hal.privacy.digitized_plan.plan`).
"""

from __future__ import annotations

import argparse
import time

from ..contract.anchor_map import drift_check_frames
from ..contract.errors import CalibrationError, DeviceUnavailable
from ..contract.noise import DigitizedReadLaw
from ..contract.profile_base import DEFAULT_CHECK_EVERY
from ..privacy.digitized_lattice import DigitizedLattice, fewest_box_reads
from ..privacy.digitized_plan import CameraFacts, DigitizedPlanRefused, plan
from ..privacy.digitized_plan import RunShape as PlanShape
from ..privacy.skellam import SkellamLattice
from ..runtime.output import print_json
from .plan import RunShape


def _lattice(shape: RunShape) -> tuple[int, float]:
    """The run shape's lattice dimension ``d`` and resolution ``k``, which a digitized plan needs."""
    if shape.dimension is None or shape.lattice_resolution is None:
        raise CalibrationError(
            "--mechanism digitized needs --dimension D >= 1 (the update's parameters) and --lattice-resolution K > 0"
        )
    return shape.dimension, float(shape.lattice_resolution)


def run_digitized_plan(
    args: argparse.Namespace, profile, calibration_path, shape: RunShape, law: DigitizedReadLaw | None = None
) -> int:
    """Print the operating point of ``profile``'s digitized reads for ``shape``, or why none (exit 1);
    ``law``: one read's law already known (a LightOn profile's, from its calibration alone)."""
    dimension, k = _lattice(shape)
    if law is None:
        law = _device_law(args, profile, calibration_path, dimension)
        if law is None:
            return 1
    started = time.perf_counter()
    trace: list[tuple[int, float]] = []
    lattice, found = fewest_reads(law, shape, args.target_epsilon, args.delta, args.max_reads, trace)
    if getattr(args, "plot", None):
        from .plan_figures import plot_digitized

        plot_digitized(
            trace,
            args.target_epsilon,
            args.delta,
            found,
            f"{profile.label}: digitized reads, d = {dimension}, k = {k:g}, {shape.steps} steps of "
            f"{shape.batch_size} of {shape.dataset_size} ({shape.sampling})",
            args.plot,
        )
    box = (
        f"read mean {law.mean_e[0]:.4g}..{law.mean_e[1]:.4g} e-, read noise {law.read_noise_e[0]:.4g}.."
        f"{law.read_noise_e[1]:.4g} e-, {law.adc_bits}-bit at {_span(law.gain_e_per_dn, law.gain_e_per_dn_high)} "
        f"e-/DN, black {_span(law.black_level_dn, law.black_level_dn_high)} DN ({law.source}; "
        f"{len(lattice.cameras)} grid camera(s))"
    )
    result: dict = {
        "profile": profile.label,
        "mechanism": "digitized",
        "target_epsilon": args.target_epsilon,
        "delta": args.delta,
        "steps": shape.steps,
        "dimension": dimension,
        "lattice_resolution": k,
        "camera": box,
    }
    if law.kept_pixels is not None:
        result.update(kept_pixels=law.kept_pixels, mean_bins=[list(b) for b in law.mean_bins])
        if law.map_pixels is not None:
            result["map_pixels"] = law.map_pixels
    if found is not None:
        reads, epsilon = found
        frames = law.frames(dimension, reads)
        checks = speckle_check_frames(profile, law, shape.steps)
        result.update(
            reads_per_count=reads,
            epsilon=epsilon,
            frames_per_step=frames,
            anchor_check_frames=checks,
            frames_total=frames * shape.steps + checks,
            camera_seconds_per_step=frames * law.frame_time_s,
            camera_seconds=(frames * shape.steps + checks) * law.frame_time_s,
        )
    else:
        result["refused"] = _what_would(law, shape, args)
    result["plan_wall_s"] = time.perf_counter() - started
    if args.json:
        print_json(result)
    else:
        _print_result(result, shape, args)
    return 0 if found is not None else 1


def _print_result(result: dict, shape: RunShape, args: argparse.Namespace) -> None:
    """The plan's text form: the run, the camera's read law, and the reads per count or the refusal."""
    print(
        f"{result['profile']}: digitized mechanism, target epsilon {args.target_epsilon:g} at delta {args.delta:g}, "
        f"{shape.steps} steps of {shape.batch_size} of {shape.dataset_size} ({shape.sampling}), "
        f"d = {result['dimension']}, k = {result['lattice_resolution']:g}"
    )
    print(f"  camera: {result['camera']}")
    if "refused" in result:
        print(f"  refused: {result['refused']}")
    else:
        print(
            f"  {result['reads_per_count']} reads per count: epsilon {result['epsilon']:.4g}; "
            f"{result['frames_per_step']} anchor-only frame(s) per step, {result['camera_seconds_per_step']:.4g} s "
            f"per step; {result['frames_total']} frames ({result['anchor_check_frames']} drift checks), "
            f"{result['camera_seconds']:.4g} s for the run"
        )
    if "kept_pixels" in result:
        print(
            f"  speckle: {result['kept_pixels']}"
            + (f" of {result['map_pixels']}" if "map_pixels" in result else "")
            + f" kept pixels, one per value, in {len(result['mean_bins'])} mean bin(s) "
            f"[e-]: {', '.join(f'{lo:.4g}..{hi:.4g}' for lo, hi in result['mean_bins'])}"
        )
    print(f"  planned in {result['plan_wall_s']:.1f} s")
    if getattr(args, "plot", None):
        print(f"wrote {args.plot}")


def _what_would(law, shape: RunShape, args: argparse.Namespace) -> str:
    """No reads up to the cap reach the target at the profile's anchor: another anchor level, or the
    nearest camera (:func:`opu_hal.privacy.digitized_plan.plan`)."""
    facts = CameraFacts(law.read_noise_e[0], law.gain_e_per_dn, law.adc_bits, law.black_level_dn, law.full_well_e)
    dimension, k = _lattice(shape)
    run = PlanShape(shape.dataset_size, shape.batch_size, shape.steps, dimension, k, args.target_epsilon, args.delta)
    head = f"no reads per count up to {args.max_reads} reach the target at this anchor"
    try:
        other = plan(facts, run, law.pixels_per_frame, law.frame_time_s, max_reads=args.max_reads)
    except DigitizedPlanRefused as exc:
        return f"{head}; {exc}"
    top = other.camera.mean_e
    return (
        f"{head}; an anchor read of {top:.4g} e- ({other.reads} reads per count, epsilon {other.epsilon:.4g}) "
        "would qualify: change anchor_power_uw or exposure_us"
    )


def device_read_law(profile, calibration_path, dimension: int) -> DigitizedReadLaw:
    """The read law of ``profile``'s device with ``calibration_path`` attached (a speckle anchor's pixels
    kept for draws of ``dimension`` values); :class:`DeviceUnavailable` where it has none."""
    from ..profiles.registry import get_backend
    from .calibrated import load_calibrated_noise

    device = get_backend(profile.backend).create(profile)  # as opu_hal.load_device builds it
    if calibration_path is not None:
        device.check_calibratable()
        device.attach_calibration(load_calibrated_noise(calibration_path, profile))
    if "speckle_values_per_draw" in device.capabilities.settable:  # speckle: kept pixels for draws of d values
        device.set_options(speckle_values_per_draw=dimension)
    return device.digitized_read_law()


def fewest_reads(
    law: DigitizedReadLaw,
    shape: RunShape,
    target_epsilon: float,
    delta: float,
    max_reads: int,
    trace: list,
    analysis: str = "per-coordinate",
) -> tuple[DigitizedLattice, tuple[int, float] | None]:
    """The lattice of ``shape`` on ``law`` (rounding ``analysis``) and its fewest reads per count reaching
    ``target_epsilon`` (with that epsilon), or None; ``trace`` receives every (reads, epsilon) tried."""
    dimension, k = _lattice(shape)
    lattice = DigitizedLattice(SkellamLattice(dimension, 1.0, k, analysis), law, max_reads=max_reads)
    found = fewest_box_reads(
        lattice, shape.dataset_size, shape.batch_size, shape.steps, target_epsilon, delta, trace, shape.sampling
    )
    return lattice, found


def _device_law(args: argparse.Namespace, profile, calibration_path, dimension: int) -> DigitizedReadLaw | None:
    """:func:`device_read_law`, or None after printing why not."""
    try:
        return device_read_law(profile, calibration_path, dimension)
    except DeviceUnavailable as exc:
        print(
            f"{profile.label}: refused: {exc}"
            + (f" (--plot {args.plot} not written: no read law to draw)" if getattr(args, "plot", None) else "")
        )
        return None


def speckle_check_frames(profile, law, steps: int) -> int:
    """Drift-check frames of a speckle anchor's run (one draw per step; 0 for a flat anchor), at the profile's
    ``anchor_check_every`` (a LightOn profile, which has no such key: :data:`DEFAULT_CHECK_EVERY`)."""
    if law.kept_pixels is None:
        return 0
    return drift_check_frames(steps, getattr(profile, "anchor_check_every", DEFAULT_CHECK_EVERY))


def _span(low: float, high: float | None) -> str:
    """A calibrated quantity as printed: its interval ``low..high``, or one value where it has no width."""
    return f"{low:.6g}" if high is None or high == low else f"{low:.6g}..{high:.6g}"
