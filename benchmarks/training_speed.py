"""Epoch time of DFA against BP, and of PDFA on the default simulated OPU against DFA.

    python -m benchmarks.training_speed [--train 13824] [--epochs 3]

Paper 000's network (784-512-512-10 tanh, batch 256, SGD), the same loop for every method, all
measured in this run: ``--epochs`` rounds, each training every method for one epoch in turn (so a
machine whose speed drifts slows all methods alike), after one untimed warm-up round; the median
epoch time per method (training steps only, no evaluation). Goals: dfa <= 1.1x bp; pdfa <= 4x dfa
on the CPU (issue 16).
"""

from __future__ import annotations

import argparse
import statistics

import torch

from benchmarks.data import fashion_or_random
from trainers.run.config import TrainConfig
from trainers.run.loop import train

# issue 16: pdfa <= 4x dfa on the 2-core CPU (<= 2x on an H100: benchmarks.gpu_training)
GOALS = {("dfa", "bp"): 1.1, ("pdfa", "dfa"): 4.0}


METHODS = ("bp", "dfa", "pdfa")


def epoch_seconds(method: str, data) -> float:
    """One epoch of ``method``, timed by the training loop."""
    config = TrainConfig.for_method(method, epochs=1, alignment=False)
    record = train(config, data=data, progress=False, log=lambda message: None)
    return record["epochs"][0]["epoch_time_s"]


def interleaved_medians(data, rounds: int) -> dict[str, float]:
    """Median epoch seconds per method over ``rounds`` rounds of one epoch each, in turn."""
    for method in METHODS:  # warm-up: compiled kernels, allocator, thread pools
        epoch_seconds(method, data)
    times: dict[str, list[float]] = {method: [] for method in METHODS}
    for _ in range(rounds):
        for method in METHODS:
            times[method].append(epoch_seconds(method, data))
    return {method: statistics.median(seconds) for method, seconds in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=13_824, help="training examples per epoch (54 batches)")
    parser.add_argument("--epochs", type=int, default=5, help="rounds of one epoch per method")
    args = parser.parse_args()
    data = fashion_or_random(args.train)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.train} examples per epoch, "
        f"median of {args.epochs} interleaved epochs"
    )
    times = interleaved_medians(data, args.epochs)
    for method, seconds in times.items():
        print(f"  {method:<5} {seconds:8.3f} s/epoch")
    for (a, b), goal in GOALS.items():
        ratio = times[a] / times[b]
        print(f"  {a}/{b} = {ratio:.2f}x  (goal <= {goal}x: {'met' if ratio <= goal else 'NOT met'})")


if __name__ == "__main__":
    main()
