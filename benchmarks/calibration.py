"""Calibration on the simulator: recovery of random hidden camera parameters, and speed.

    python -m benchmarks.calibration [--seeds 50] [--frames 32]

Prints, per parameter, the largest relative error and how many 95 % intervals cover the truth
over the seeds (the bar: < 5 % and >= 90 %), then the time of a full calibration of ``opu-sim``
over 5 temperatures against the time of one 1024-row projection batch measured in the same run.
"""

from __future__ import annotations

import argparse
import time

import torch

import opu_hal
from opu_hal.calibration import ground_truth as gt
from opu_hal.calibration.calibrate_command import default_temperatures
from opu_hal.calibration.run import DEFAULT_FRAMES, calibrate_device


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--frames", type=int, default=DEFAULT_FRAMES)
    args = parser.parse_args()
    worst = {name: 0.0 for name in gt.PARAMETERS}
    covered = {name: 0 for name in gt.PARAMETERS}
    start = time.perf_counter()
    for seed in range(args.seeds):
        truth = gt.draw_camera(seed)
        calibration = calibrate_device(
            opu_hal.load_device(truth.profile),
            gt.TEMPERATURES,
            gt.EXPOSURES,
            gt.DARK_EXPOSURES,
            frames=args.frames,
            bootstrap=200,
        )
        for name, estimate in gt.recovered(calibration).items():
            value = truth.values[name]
            worst[name] = max(worst[name], abs(estimate.value / value - 1))
            covered[name] += estimate.lower <= value <= estimate.upper
    per_seed = (time.perf_counter() - start) / args.seeds
    print(
        f"ground truth: {args.seeds} seeds, {args.frames} frames per series, 1024 pixels, "
        f"{per_seed:.2f} s per calibration"
    )
    for name in gt.PARAMETERS:
        print(f"  {name:<22} max |error| {worst[name]:7.3%}   95% CI covers truth {covered[name]}/{args.seeds}")

    device = opu_hal.load_device("opu-sim")
    x = (torch.rand(1024, device.in_features, generator=torch.Generator().manual_seed(0)) < 0.5).float()
    device.project(x)  # warm: the matrix is generated once
    start = time.perf_counter()
    device.project(x)
    baseline = time.perf_counter() - start
    start = time.perf_counter()
    calibration = calibrate_device(
        device,
        default_temperatures(device.profile),
        [device.profile.exposure_us],
        [100_000.0, 1_000_000.0],
        frames=DEFAULT_FRAMES,
    )
    elapsed = time.perf_counter() - start
    print(
        f"opu-sim, 5 temperatures, {calibration.frames_total} frames: {elapsed:.2f} s "
        f"(x{elapsed / baseline:.0f} one 1024-row projection, {baseline * 1e3:.1f} ms, same run)"
    )


if __name__ == "__main__":
    main()
