"""Seconds of ``make_private_with_epsilon`` for every method and noise source it offers, and of one
kappa curve of the rounding analysis (orders 2 to 64) at a few Poisson means.

    python -m benchmarks.planning_speed

``examples/private_own_mlp.py``'s setting: 20 000 examples of 20 features, MLP 20-128-10, batch 64,
5 epochs, (epsilon 3, delta 1e-5), device noise from ``opu-sim-dp`` at lattice resolution 20; the
call alone is timed (the imports before it are not). Set ``OPU_HAL_CACHE`` to an empty folder to
time it without stored kappa curves. Goal: each call <= 2 s.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from torch import nn

from opu_hal.privacy.rounding import rounding_rdp_coefficient
from trainers.api import PrivacyEngine

CASES = (("dp-sgd", "software"), ("dp-dfa", "software"), ("dp-dfa", "device"))
GOAL_S = 2.0


def make_private_seconds(method: str, noise_source: str, n: int = 20_000, epochs: int = 5) -> tuple[float, float]:
    """(wall, CPU) seconds of the call: this process's CPU time, which other jobs on a shared machine do not inflate."""
    generator = torch.Generator().manual_seed(0)
    x, y = torch.randn(n, 20, generator=generator), torch.randint(0, 10, (n,), generator=generator)
    model = nn.Sequential(nn.Linear(20, 128), nn.Sigmoid(), nn.Linear(128, 10))
    device = {"opu": "opu-sim-dp", "lattice_resolution": 20} if noise_source == "device" else {}
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-2)  # the first one imports torch._dynamo (3 s): not timed
    start, cpu = time.perf_counter(), time.process_time()
    PrivacyEngine().make_private_with_epsilon(
        module=model,
        optimizer=optimizer,
        data_loader=(x, y),
        batch_size=64,
        target_epsilon=3.0,
        target_delta=1e-5,
        epochs=epochs,
        max_grad_norm=0.1,
        method=method,
        noise_source=noise_source,
        **device,
    )
    return time.perf_counter() - start, time.process_time() - cpu


def kappa_seconds(poisson_mean: float) -> float:
    start = time.perf_counter()
    rounding_rdp_coefficient(np.arange(2, 65, dtype=np.float64), poisson_mean)
    return time.perf_counter() - start


def main() -> None:
    for method, source in CASES:
        seconds, cpu = make_private_seconds(method, source)
        print(
            f"make_private_with_epsilon({method}, {source}): {seconds:.2f} s (CPU {cpu:.2f} s) "
            f"(goal <= {GOAL_S} s: {'met' if seconds <= GOAL_S else 'NOT met'})",
            flush=True,
        )
    for mean in (20.0, 539.0, 1e4, 1e6):
        print(f"kappa curve at a Poisson mean of {mean:g}: {kappa_seconds(mean):.3f} s", flush=True)


if __name__ == "__main__":
    main()
