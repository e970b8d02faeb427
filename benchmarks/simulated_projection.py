"""Simulated OPU speed and memory, as ratios to a plain torch matmul measured in the same run.

    python -m benchmarks.simulated_projection [--skip-memory] [--compute auto|cpu|cuda]

Prints, for batch 256 in 10 -> out 1024, batch 64 in 4096 -> out 16384 and batch 256 in 784 ->
out 16384, the median time of a linear-mode simulated projection (three camera frames per row) and
of ``x @ W`` of the same shape, both on the compute device; then the peak resident memory of a
CPU projection with in 10 000 -> out 100 000 (goal: < 2 GiB), measured in a child process.
Goals (issue 16): <= 15x the matmul at (256, 10, 1024) on the 2-core CPU, <= 5x at
(256, 784, 16384) on an H100.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from functools import partialmethod

import torch

import opu_hal
from benchmarks.interleave import Timed
from benchmarks.timing import median_seconds
from opu_hal.backends.simulated.camera import Sensor

SHAPES = [(256, 10, 1024), (64, 4096, 16384), (256, 784, 16384)]
LARGE = (8, 10_000, 100_000)
GOALS = {"cpu": {(256, 10, 1024): 15.0}, "cuda": {(256, 784, 16384): 5.0}}  # issue 16


def simulated(in_features: int, out_features: int, mode: str = "linear", compute: str = "cpu") -> opu_hal.Device:
    return opu_hal.load_device(
        opu_hal.SimulatedProfile(
            backend="simulated",
            in_features=in_features,
            out_features=out_features,
            mode=mode,
            compute=compute,
        )
    )


def time_shape(batch: int, in_features: int, out_features: int, compute: str = "cpu") -> dict[str, float]:
    linear = simulated(in_features, out_features, compute=compute)
    intensity = simulated(in_features, out_features, mode="intensity", compute=compute)
    where = linear.capabilities.compute_device
    generator = torch.Generator().manual_seed(0)
    x = (torch.rand(batch, in_features, generator=generator) < 0.5).float().to(where)
    weights = torch.randn(in_features, out_features, generator=generator).to(where)
    # the matmul is ~0.15 ms on the CPU: more warm-up and repeats, or thread start-up sets the median
    matmul_s = median_seconds(lambda: x @ weights, repeats=51, warmup=10)
    linear_s = median_seconds(lambda: linear.project(x))
    intensity_s = median_seconds(lambda: intensity.project(x))
    return {
        "matmul_s": matmul_s,
        "linear_s": linear_s,
        "intensity_s": intensity_s,
        "linear_ratio": linear_s / matmul_s,
        "intensity_ratio": intensity_s / matmul_s,
    }


def projection_rows(batch: int, in_features: int, out_features: int, compute: str = "cpu") -> dict[str, Timed]:
    """A plain matmul and a linear simulated projection of the same shape, each a callable returning its
    median seconds over a few calls (rows for :mod:`benchmarks.interleave`, baseline ``"matmul"``)."""
    linear = simulated(in_features, out_features, compute=compute)
    where = linear.capabilities.compute_device
    generator = torch.Generator().manual_seed(0)
    x = (torch.rand(batch, in_features, generator=generator) < 0.5).float().to(where)
    weights = torch.randn(in_features, out_features, generator=generator).to(where)
    rows = {
        "matmul": lambda: median_seconds(lambda: x @ weights, repeats=21, warmup=5),
        "simulated linear": lambda: median_seconds(lambda: linear.project(x), repeats=5, warmup=1),
    }
    if torch.device(where).type == "cuda":  # the one-kernel linear read against the three fused reads it replaced
        rows["simulated linear, three reads"] = lambda: median_seconds(
            lambda: three_reads(linear, x), repeats=5, warmup=1
        )
    return rows


def three_reads(device: opu_hal.Device, x: torch.Tensor) -> None:
    """``device.project(x)`` with the camera's linear read as three separate reads (the path before
    :mod:`opu_hal.kernels.triton_linear`)."""
    one_kernel = Sensor.read_linear
    Sensor.read_linear = partialmethod(one_kernel, separate=True)  # type: ignore[method-assign]
    try:
        device.project(x)
    finally:
        Sensor.read_linear = one_kernel  # type: ignore[method-assign]


def high_water_rss_bytes() -> int:
    """Peak resident memory of this process (VmHWM; ru_maxrss would include the parent's)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def peak_memory_child() -> None:
    """Runs in a child: one large projection, then prints the peak RSS in bytes."""
    batch, in_features, out_features = LARGE
    before = high_water_rss_bytes()
    device = simulated(in_features, out_features)
    x = (torch.rand(batch, in_features, generator=torch.Generator().manual_seed(0)) < 0.5).float()
    values = device.project(x).values
    assert values.shape == (batch, out_features)
    print(json.dumps({"peak_rss_bytes": high_water_rss_bytes(), "rss_after_imports_bytes": before}))


def measure_peak_memory() -> dict[str, float]:
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.simulated_projection", "--child"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-memory", action="store_true", help="skip the 10k x 100k case")
    parser.add_argument(
        "--compute",
        default="cpu",
        choices=("auto", "cpu", "cuda"),
        help="where the simulation and the matmul run (default cpu)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        peak_memory_child()
        return
    where = simulated(10, 16, compute=args.compute).capabilities.compute_device
    name = torch.cuda.get_device_name() if where == "cuda" else f"{torch.get_num_threads()} CPU threads"
    print(f"torch {torch.__version__}, compute {where} ({name})")
    print(f"{'shape (batch, in, out)':<24} {'matmul':>10} {'linear':>10} {'ratio':>7} {'intensity':>10} {'ratio':>7}")
    for shape in SHAPES:
        r = time_shape(*shape, compute=where)
        print(
            f"{shape!s:<24} {r['matmul_s'] * 1e3:8.3f}ms {r['linear_s'] * 1e3:8.2f}ms "
            f"{r['linear_ratio']:6.1f}x {r['intensity_s'] * 1e3:8.2f}ms {r['intensity_ratio']:6.1f}x"
        )
        if shape in GOALS[where]:
            goal = GOALS[where][shape]
            print(
                f"  linear/matmul at {shape} = {r['linear_ratio']:.1f}x ({where} goal <= {goal}x: "
                f"{'met' if r['linear_ratio'] <= goal else 'NOT met'})"
            )
    if not args.skip_memory:
        memory = measure_peak_memory()
        gib = memory["peak_rss_bytes"] / 2**30
        base = memory["rss_after_imports_bytes"] / 2**30
        print(
            f"peak RSS, linear projection batch {LARGE[0]}, in {LARGE[1]} -> out {LARGE[2]}: "
            f"{gib:.2f} GiB (process after imports: {base:.2f} GiB; goal < 2 GiB)"
        )


if __name__ == "__main__":
    main()
