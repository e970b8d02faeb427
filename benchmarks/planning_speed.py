"""Seconds of ``make_private_with_epsilon`` for every method and noise source it offers, of one
kappa curve of the rounding analysis (orders 2 to 64) at a few Poisson means, and of ``opu-hal plan``
at the main job's scale (``scripts/main.sh``: digitized speckle counts, Poisson sampling, 780 steps of
2048 of 54 000, d = 1 018 890, k = 36), run as a user runs it, imports included.

    python -m benchmarks.planning_speed [--calibration CAL] [--skip-api]

CAL: the main job's calibration (``results/calibration/main-opu-sim-dp.json`` after ``bash
scripts/main.sh``); without it one is made first in a temporary folder (``opu-hal calibrate opu-sim-dp
--temperatures 25 --exposures 400``, not timed). Goal for the plan: <= 10 s.

``examples/private_own_mlp.py``'s setting: 20 000 examples of 20 features, MLP 20-128-10, batch 64,
5 epochs, (epsilon 3, delta 1e-5), device noise from ``opu-sim-dp`` at lattice resolution 20; the
call alone is timed (the imports before it are not). Set ``OPU_HAL_CACHE`` to an empty folder to
time it without stored kappa curves. Goal: each call <= 2 s.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from opu_hal.privacy.rounding import rounding_rdp_coefficient
from trainers.api import PrivacyEngine

CASES = (("dp-sgd", "software"), ("dp-dfa", "software"), ("dp-dfa", "device"))
GOAL_S = 2.0
PLAN_GOAL_S = 10.0
MAIN_PLAN = [
    "plan",
    "--profile",
    "opu-sim-dp",
    "--mechanism",
    "digitized",
    "--sampling",
    "poisson",
    "--dataset-size",
    "54000",
    "--batch-size",
    "2048",
    "--steps",
    "780",
    "--target-epsilon",
    "5.31",
    "--delta",
    "1e-5",
    "--dimension",
    "1018890",
    "--lattice-resolution",
    "36",
]


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


def opu_hal(*argv: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "opu_hal", *argv]
    return subprocess.run(command, check=True, capture_output=True, text=True)


def main_plan_seconds(calibration: Path) -> tuple[float, str]:
    """Wall seconds of the main job's plan, imports included, and its last lines."""
    start = time.perf_counter()
    done = opu_hal(*MAIN_PLAN, "--calibration", str(calibration))
    return time.perf_counter() - start, "\n".join(done.stdout.strip().splitlines()[-3:-1])


def time_main_plan(calibration: Path | None) -> None:
    with tempfile.TemporaryDirectory() as folder:
        if calibration is None:
            calibration = Path(folder) / "main-opu-sim-dp.json"
            opu_hal("calibrate", "opu-sim-dp", "--temperatures", "25", "--exposures", "400", "--out", str(calibration))
        seconds, answer = main_plan_seconds(calibration)
    verdict = "met" if seconds <= PLAN_GOAL_S else "NOT met"
    print(f"opu-hal plan at the main job's scale: {seconds:.2f} s (goal <= {PLAN_GOAL_S:g} s: {verdict})\n{answer}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibration", type=Path, help="the main job's calibration (default: make one)")
    parser.add_argument("--skip-api", action="store_true", help="time only the plan")
    args = parser.parse_args()
    time_main_plan(args.calibration)
    if args.skip_api:
        return
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
