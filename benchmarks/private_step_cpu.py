"""CPU time of a private step against a plain one, at one thread: a measure a shared machine
cannot blur as much as wall time.

    python -m benchmarks.private_step_cpu [--train 13824] [--rounds 2]

The setup of :mod:`benchmarks.private_vs_opacus` (784-512-512-10 tanh, batch 256, Adam, epsilon 8);
torch and Numba on one thread, every step timed by :func:`time.process_time` (this process's CPU
seconds, so other engineers' jobs on the machine do not count): the plain torch loop's steps, and
ours from one step's end to the next (sampling, budget check, gradients, noise, optimizer,
accounting). Medians per step, ratios to the plain step of the same round. The wall-clock goals of
issue 33 are :mod:`benchmarks.private_vs_opacus`'s; this says where the work went.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from benchmarks.data import fashion_or_random
from benchmarks.private_vs_opacus import BATCH, DELTA, HIDDEN, LR, torch_mlp
from trainers.run.config import TrainConfig
from trainers.run.loop import Callback, train

METHODS = ("dp-sgd", "dp-dfa")


def plain_step_cpu(data) -> float:
    """Median CPU seconds of a plain torch step (the loop of ``private_vs_opacus``)."""
    model = torch_mlp()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    loader = DataLoader(TensorDataset(data.train.x, data.train.y), batch_size=BATCH, shuffle=True)
    times, last = [], time.process_time()
    for x, y in loader:
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        now = time.process_time()
        times.append(now - last)
        last = now
    return statistics.median(times)


class StepClock(Callback):
    """CPU seconds from one step's end to the next."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.last: float | None = None

    def after_step(self, trainer) -> None:
        now = time.process_time()
        if self.last is not None:
            self.times.append(now - self.last)
        self.last = now


def private_step_cpu(method: str, data) -> float:
    """Median CPU seconds of one of our private steps."""
    config = TrainConfig.for_method(
        method,
        epochs=1,
        batch_size=BATCH,
        hidden=HIDDEN,
        activation="tanh",
        optimizer="adam",
        lr=LR,
        inputs="unit",
        target_epsilon=8.0,
        delta=DELTA,
        alignment=False,
    )
    clock = StepClock()
    train(config, data=data, progress=False, log=lambda message: None, callbacks=[clock])
    return statistics.median(clock.times)


def round_line(data) -> str:
    """One round: the plain step, then each method's, as milliseconds and ratios."""
    plain = plain_step_cpu(data)
    parts = [f"plain {1e3 * plain:.2f}"]
    for method in METHODS:
        seconds = private_step_cpu(method, data)
        parts.append(f"{method} {1e3 * seconds:.2f} ({seconds / plain:.2f}x)")
    return "CPU ms/step, 1 thread: " + "  ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=13_824)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if importlib.util.find_spec("numba") is not None:
        import numba

        numba.set_num_threads(1)
    data = fashion_or_random(args.train)
    round_line(fashion_or_random(2 * BATCH * 4))  # warm-up: compiled kernels, allocator
    for _ in range(args.rounds):
        print(round_line(data), flush=True)


if __name__ == "__main__":
    main()
