"""The work of ``opu-hal account`` (epsilon of a described run) and ``opu-hal plan`` (noise for a
target); their parsers are in :mod:`opu_hal.cli`."""

from __future__ import annotations

import argparse
import functools
import math
from collections.abc import Callable

from ..runtime.output import print_json
from .accountant import Accountant
from .events import PrivacyParameterError
from .inverse import noise_std_for, smallest_noise_multiplier
from .run_shape import RELATION_WORDS, RunShape, as_flags, run_description, steps_for

NOISE_MULTIPLIER_RANGE = (1e-4, 1e6)
#: What the accounted epsilon assumes of N (issue 27): under add/remove the neighbours' sizes
#: differ, so a size used for the sampling rate and step count must be declared public.
DATASET_SIZE_CONVENTION = (
    "treated as public: the sampling rate and step count are computed from it; under "
    "add/remove, publish a declared bound (train --public-dataset-size) rather than the true size"
)


def shape_from_args(args: argparse.Namespace) -> RunShape:
    """The run ``--dataset-size/--batch-size/--epochs|--steps/--sampling/--min-batch`` describe."""
    steps = steps_for(args.dataset_size, args.batch_size, epochs=args.epochs, steps=args.steps)
    return RunShape(
        sampling=args.sampling,
        dataset_size=args.dataset_size,
        batch_size=args.batch_size,
        steps=steps,
        min_batch=getattr(args, "min_batch", None),
    )


def with_flags(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``command`` whose privacy errors name the command line's flags instead of quantities."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except PrivacyParameterError as exc:
            raise PrivacyParameterError(as_flags(str(exc))) from exc

    return run


def _cmd_account(args: argparse.Namespace) -> int:
    low, high = NOISE_MULTIPLIER_RANGE
    if not (math.isfinite(args.noise_multiplier) and low <= args.noise_multiplier <= high):
        raise PrivacyParameterError(f"noise_multiplier must be in [{low:g}, {high:g}], got {args.noise_multiplier}")
    event_for, neighboring, steps = run_description(shape_from_args(args))
    event = event_for(args.noise_multiplier)
    accountant = Accountant(neighboring)
    accountant.step(event, steps)
    epsilon, order = accountant.get_epsilon_and_order(args.delta)
    result = {
        "event": event.to_dict(),
        "neighboring": neighboring,
        "steps": steps,
        "delta": args.delta,
        "epsilon_rdp": epsilon,
        "optimal_order": order,
    }
    result["dataset_size"] = DATASET_SIZE_CONVENTION
    if not args.json:
        print(f"{type(event).__name__} {event.to_dict()}  ({neighboring}), {steps} steps")
        print(f"epsilon (RDP) = {epsilon:.6g} at delta = {args.delta:g} (order {order:g})", flush=True)
    if not event.pld_supported:
        result["epsilon_pld_skipped"] = f"dp-accounting's PLD does not cover {type(event).__name__}"
    elif not math.isfinite(epsilon):
        result["epsilon_pld_skipped"] = "the RDP curve is infinite"
    else:
        # The grid is bounded (PLD_MAX_POINTS): memory and time stay small; a coarser grid is still pessimistic.
        interval = accountant.pld_interval()
        result["epsilon_pld"] = accountant.get_epsilon_pld(args.delta, interval)
        result["pld_interval"] = interval
    if args.json:
        print_json(result)
        return 0
    if "epsilon_pld" in result:
        print(f"epsilon (PLD) = {result['epsilon_pld']:.6g} (loss grid {result['pld_interval']:.3g}, pessimistic)")
    elif "epsilon_pld_skipped" in result:
        print(f"epsilon (PLD) skipped: {result['epsilon_pld_skipped']}")
    print(f"--dataset-size {args.dataset_size}: {DATASET_SIZE_CONVENTION}")
    return 0


def _cmd_plan(args: argparse.Namespace) -> int:
    if getattr(args, "profile", None):  # device mode, registered by opu_hal.calibration
        if getattr(args, "device_plan", None) is None:
            raise PrivacyParameterError("--profile: no device planner is installed (opu_hal.calibration registers it)")
        code: int = args.device_plan(args)
        return code
    if getattr(args, "plot", None):
        raise PrivacyParameterError(
            f"--plot {args.plot}: plan draws a device's operating points, so --plot needs "
            "--profile P (without it, plan prints a noise multiplier and draws nothing)"
        )
    event_for, neighboring, steps = run_description(shape_from_args(args))
    z = smallest_noise_multiplier(event_for, steps, args.target_epsilon, args.delta, neighboring)
    accountant = Accountant(neighboring)
    accountant.step(event_for(z), steps)
    result = {
        "noise_multiplier": z,
        "steps": steps,
        "neighboring": neighboring,
        "target_epsilon": args.target_epsilon,
        "delta": args.delta,
        "epsilon_rdp": accountant.get_epsilon(args.delta),
    }
    if args.sensitivity is not None:
        result["sensitivity"] = args.sensitivity
        result["sensitivity_relation"] = neighboring
        result["noise_std"] = noise_std_for(z, args.sensitivity)
    if args.json:
        print_json(result)
        return 0
    print(
        f"smallest noise multiplier: {z:.6g} ({steps} steps, {neighboring}); "
        f"epsilon = {result['epsilon_rdp']:.6g} <= {args.target_epsilon:g} at delta = {args.delta:g}"
    )
    if "noise_std" in result:
        print(
            f"noise std at L2 sensitivity {args.sensitivity:g} under {RELATION_WORDS[neighboring]}: "
            f"{result['noise_std']:.6g}"
        )
    return 0


#: The handlers opu_hal.cli runs; privacy errors name the command line's flags.
cmd_account = with_flags(_cmd_account)
cmd_plan = with_flags(_cmd_plan)
