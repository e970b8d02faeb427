"""Epoch time of every method against a plain (BP) epoch on the same compute device, one run.

    python -m benchmarks.gpu_training [--epochs 2] [--compute auto]

Paper 000's network (784-512-512-10 tanh, batch 256), the full FashionMNIST training split (54 000
examples), the median epoch time (training steps only). Goals (issue 16, on an H100): dp-sgd and
dp-dfa <= 1.5x a plain epoch; pdfa on the simulated OPU <= 2x dfa.
"""

from __future__ import annotations

import argparse
import statistics

import torch

from benchmarks.data import fashion_or_random
from trainers.run.config import TrainConfig
from trainers.run.loop import train

RUNS = {
    "bp": {},
    "dfa": {"profile": "torch-auto"},
    "pdfa": {"profile": "opu-sim"},
    "dp-sgd": {"noise_multiplier": 1.0},
    "dp-dfa": {"noise_multiplier": 1.0, "hidden": (512, 512), "activation": "tanh", "batch_size": 256},
    "dp-dfa (device)": {
        "noise_multiplier": 1.0,
        "hidden": (512, 512),
        "activation": "tanh",
        "batch_size": 256,
        "noise_source": "device",
        "profile": "opu-sim-dp",
    },
}
GOALS = {("dp-sgd", "bp"): 1.5, ("dp-dfa", "bp"): 1.5, ("pdfa", "dfa"): 2.0}


def epoch_seconds(name: str, data, epochs: int, compute: str) -> float:
    method = name.split(" ")[0]
    options = {"hidden": (512, 512), "activation": "tanh", "batch_size": 256, **RUNS[name]}
    config = TrainConfig.for_method(method, epochs=epochs, alignment=False, compute=compute, **options)
    record = train(config, data=data, progress=False, log=lambda message: None)
    return statistics.median(e["epoch_time_s"] for e in record["epochs"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--train", type=int, default=54_000)
    parser.add_argument("--compute", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--only", default=None, help="comma-separated subset of the runs")
    args = parser.parse_args()
    data = fashion_or_random(args.train)
    where = torch.cuda.get_device_name() if torch.cuda.is_available() and args.compute != "cpu" else "cpu"
    print(
        f"torch {torch.__version__}, compute {args.compute} ({where}), {args.train} examples, "
        f"median of {args.epochs} epochs"
    )
    names = args.only.split(",") if args.only else list(RUNS)
    times = {}
    for name in names:
        times[name] = epoch_seconds(name, data, args.epochs, args.compute)
        print(f"  {name:<16} {times[name]:8.3f} s/epoch  ({times[name] / times[names[0]]:.2f}x {names[0]})", flush=True)
    for (a, b), goal in GOALS.items():
        if a in times and b in times:
            ratio = times[a] / times[b]
            print(f"  {a}/{b} = {ratio:.2f}x  (goal <= {goal}x: {'met' if ratio <= goal else 'NOT met'})")


if __name__ == "__main__":
    main()
