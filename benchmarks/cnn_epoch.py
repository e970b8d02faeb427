"""The loop's CNN: a DP-SGD epoch and a hybrid DP-DFA epoch against a BP epoch of the same network,
interleaved (:mod:`benchmarks.interleave`).

    python -m benchmarks.cnn_epoch [--rounds 5] [--train 8192] [--channels 32,64]

The CNN of ``--model cnn`` (3x3 convs of ``--channels``, 2x2 average pooling, a linear head) on
FashionMNIST, batch 256, Adam, epsilon 8 over the epoch for the private rows. Each round runs a one-epoch
run of every row; the median of the per-round ratios to BP is printed with its spread. To time another
checkout, run this file from there with ``PYTHONPATH=<checkout>``.
"""

from __future__ import annotations

import argparse

import torch

from benchmarks.data import fashion_or_random
from benchmarks.interleave import interleaved_ratios
from trainers.run.config import TrainConfig
from trainers.run.loop import train

ROWS = ("bp", "dp-sgd", "dp-dfa")


def epoch_seconds(method: str, data, channels: tuple[int, ...], epsilon: float) -> float:
    """Seconds of one epoch of ``method`` on the CNN (its training steps, as the loop times them)."""
    private = {"target_epsilon": epsilon, "delta": 1e-5} if method != "bp" else {}
    config = TrainConfig.for_method(
        method,
        model="cnn",
        hidden=channels,
        epochs=1,
        batch_size=256,
        optimizer="adam",
        alignment=False,
        **private,
    )
    record = train(config, data=data, progress=False, log=lambda message: None)
    return float(record["epochs"][-1]["epoch_time_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--train", type=int, default=8192)
    parser.add_argument("--channels", default="32,64")
    parser.add_argument("--epsilon", type=float, default=8.0)
    args = parser.parse_args()
    channels = tuple(int(c) for c in args.channels.split(","))
    data = fashion_or_random(args.train)
    rows = {method: (lambda method=method: epoch_seconds(method, data, channels, args.epsilon)) for method in ROWS}
    for row in rows.values():  # warm-up: kernels, caches
        row()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; CNN {channels}, {args.train} examples")
    for name, ratio in interleaved_ratios(rows, args.rounds, "bp").items():
        print(f"  {name:<8} {ratio.seconds:7.3f} s/epoch  {ratio} bp")


if __name__ == "__main__":
    main()
