"""Cost of a DP-DFA step with device noise (lattice Skellam from opu-sim-dp) against the same step
with software Gaussian noise, both from the secure generator, measured in one run (issue 12 goal:
<= 1.5x).

    python -m benchmarks.privacy_noise [--batch 2048] [--hidden 128,256]
"""

from __future__ import annotations

import argparse

import opu_hal
from benchmarks.data import fashion_or_random
from benchmarks.timing import median_seconds
from trainers.core.model import MLP
from trainers.methods import METHODS, MethodContext
from trainers.run.config import TrainConfig


def step_seconds(noise_source: str, batch: int, hidden: tuple[int, ...], repeats: int) -> tuple[float, int]:
    extra = {"profile": "opu-sim-dp"} if noise_source == "device" else {}
    config = TrainConfig.for_method(
        "dp-dfa",
        noise_source=noise_source,
        noise_multiplier=1.0,
        batch_size=batch,
        hidden=hidden,
        activation="tanh",
        **extra,
    )
    data = fashion_or_random(batch)
    device = opu_hal.load_device("opu-sim-dp") if noise_source == "device" else None
    model = MLP([784, *hidden, 10], "tanh")
    method = METHODS["dp-dfa"](model, MethodContext(config, device, 784, 10, 54_000))
    method.set_noise_multiplier(1.0)
    x, y = data.train.x, data.train.y
    return median_seconds(lambda: method.compute_gradients(x, y), repeats=repeats), method.dimension


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--hidden", default="128,256")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    hidden = tuple(int(w) for w in args.hidden.split(","))
    software, d = step_seconds("software", args.batch, hidden, args.repeats)
    device, _ = step_seconds("device", args.batch, hidden, args.repeats)
    print(f"DP-DFA step, batch {args.batch}, 784-{args.hidden}-10 ({d} parameters), median of {args.repeats}:")
    print(f"  software Gaussian (secure generator): {software * 1e3:8.2f} ms")
    print(
        f"  device Skellam (opu-sim-dp):          {device * 1e3:8.2f} ms   ratio {device / software:.2f}x (goal <= 1.5x)"
    )


if __name__ == "__main__":
    main()
