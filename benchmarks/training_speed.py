"""Epoch time of DFA against BP, and of PDFA on the default simulated OPU against DFA.

    python -m benchmarks.training_speed [--train 13824] [--epochs 3]

Paper 000's network (784-512-512-10 tanh, batch 256, SGD), the same loop for every method, all
measured in this run: ``--epochs`` rounds, each training every method for one epoch in turn, bp
first (:mod:`benchmarks.interleave`; a machine whose speed drifts slows all methods alike), after one
untimed warm-up round; each ratio is taken within its round, and the median ratio is printed with
its spread (min-max over the rounds; training steps only, no evaluation). Goals: dfa <= 1.1x bp; pdfa <= 4x dfa
on the CPU (issue 16).
"""

from __future__ import annotations

import argparse

import torch

from benchmarks.data import fashion_or_random
from benchmarks.interleave import Timed, interleaved_times, ratios
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


def interleaved(data, rounds: int) -> dict[str, list[float]]:
    """Epoch seconds per method in each of ``rounds`` rounds (one epoch each, bp first, the others
    rotated), after one untimed warm-up round (compiled kernels, allocator, thread pools)."""
    rows: dict[str, Timed] = {method: (lambda method=method: epoch_seconds(method, data)) for method in METHODS}
    for row in rows.values():
        row()
    return interleaved_times(rows, rounds, "bp")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=13_824, help="training examples per epoch (54 batches)")
    parser.add_argument("--epochs", type=int, default=5, help="rounds of one epoch per method")
    args = parser.parse_args()
    data = fashion_or_random(args.train)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.train} examples per epoch, "
        f"{args.epochs} interleaved rounds; ratios within each round, median [min-max]"
    )
    times = interleaved(data, args.epochs)
    for method, ratio in ratios(times, "bp").items():
        print(f"  {method:<5} {ratio.seconds:8.3f} s/epoch  {ratio} bp")
    for (a, b), goal in GOALS.items():
        ratio = ratios(times, b)[a]
        print(f"  {a}/{b} = {ratio}  (goal <= {goal}x: {'met' if ratio.median <= goal else 'NOT met'})")


if __name__ == "__main__":
    main()
