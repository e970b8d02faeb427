"""Where a training step's time goes, per method: torch.profiler tables (CPU and CUDA time).

    python -m benchmarks.gpu_profile [--out results/gpu] [--steps 30] [--only pdfa,dp-sgd]

For each run of :mod:`benchmarks.gpu_training` (paper 000's network, batch 256), profiles
``--steps`` training steps after a one-epoch warm-up of the same length and writes the top
operators by self CPU time and by self device time to ``OUT/profile-<run>.txt``; prints the
wall time per step.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from benchmarks.data import fashion_or_random
from benchmarks.gpu_training import RUNS
from benchmarks.timing import synchronize
from trainers.run.config import TrainConfig
from trainers.run.loop import train


def profile_run(name: str, data, steps: int, compute: str, out: Path) -> float:
    method = name.split(" ")[0]
    options = {"hidden": (512, 512), "activation": "tanh", "batch_size": 256, **RUNS[name]}
    config = TrainConfig.for_method(
        method, epochs=1, alignment=False, compute=compute, train_limit=256 * steps, **options
    )
    quiet = {"progress": False, "log": lambda message: None}
    train(config, data=data, **quiet)  # warm-up: kernels, caches, matrices
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    synchronize()
    began = time.perf_counter()
    with profile(activities=activities) as prof:
        train(config, data=data, **quiet)
        synchronize()
    per_step = (time.perf_counter() - began) / steps
    table = prof.key_averages()
    text = [f"{name}: {per_step * 1e3:.2f} ms per step (under the profiler, evaluation included)"]
    text.append(table.table(sort_by="self_cpu_time_total", row_limit=30))
    if torch.cuda.is_available():
        text.append(table.table(sort_by="self_device_time_total", row_limit=20))
    out.joinpath(f"profile-{name.replace(' ', '_').replace('(', '').replace(')', '')}.txt").write_text("\n".join(text))
    return per_step


def profile_projection(shape: tuple[int, int, int], out: Path) -> None:
    """The simulated OPU's linear projection at ``(batch, in, out)`` on the default compute device."""
    from benchmarks.simulated_projection import simulated

    batch, n_in, n_out = shape
    device = simulated(n_in, n_out, compute="auto")
    x = (torch.rand(batch, n_in) < 0.5).float().to(device.capabilities.compute_device)
    for _ in range(3):
        device.project(x)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    synchronize()
    with profile(activities=activities) as prof:
        for _ in range(10):
            device.project(x)
        synchronize()
    table = prof.key_averages()
    text = [f"projection {shape}, 10 calls", table.table(sort_by="self_cpu_time_total", row_limit=25)]
    if torch.cuda.is_available():
        text.append(table.table(sort_by="self_device_time_total", row_limit=25))
    out.joinpath(f"profile-projection-{n_in}-{n_out}.txt").write_text("\n".join(text))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results/gpu")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--compute", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--only", default=None, help="comma-separated subset of the runs ('' for none)")
    parser.add_argument(
        "--projection",
        action="store_true",
        help="also profile simulated projections at (256, 10, 1024) and (256, 784, 16384)",
    )
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.projection:
        for shape in ((256, 10, 1024), (256, 784, 16384)):
            profile_projection(shape, out)
    data = fashion_or_random(256 * args.steps)
    for name in [n for n in args.only.split(",") if n] if args.only is not None else list(RUNS):
        print(f"  {name:<16} {profile_run(name, data, args.steps, args.compute, out) * 1e3:8.2f} ms/step", flush=True)


if __name__ == "__main__":
    main()
