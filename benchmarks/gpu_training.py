"""Epoch time of every method against a plain (BP) epoch on the same compute device, interleaved.

    python -m benchmarks.gpu_training [--rounds 3] [--compute auto] [--only bp,dp-sgd]

Paper 000's network (784-512-512-10 tanh, batch 256), the full FashionMNIST training split (54 000
examples). After one untimed warm-up epoch of every run, ``--rounds`` rounds each train every run
for two epochs and time the second (steady state), bp first (:mod:`benchmarks.interleave`): each ratio is taken within its round, and
the median ratio is printed with its spread (min-max). Then the simulated OPU's linear projection
against a plain matmul at (256, 784 -> 16384), interleaved the same way. Needs neither Opacus nor a
package registry (the lent GPU machine has neither). Goals (on an H100): dp-sgd and dp-dfa <= 1.2x a
plain epoch, device-noise dp-dfa <= 1.3x; pdfa on the simulated OPU <= 2x dfa; the simulated linear
projection <= 5x the matmul. ``--only "bp,dp-sgd,dp-sgd no-normals"`` adds dp-sgd with one part of its
step taken out (``ABLATIONS``: the normals, the budget check, the accountant, or fixed-size sampling), or
with the Poisson sampler before its 16-bit prefixes (``dp-sgd whole-uniforms``).
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable
from unittest import mock

import torch

from benchmarks.data import fashion_or_random
from benchmarks.interleave import Timed, interleaved_ratios, interleaved_times, ratios
from benchmarks.simulated_projection import projection_rows
from trainers.core.sampling import COMPILED_STREAM
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


def _zeros_on_model(self, shape: torch.Size) -> torch.Tensor:
    return torch.zeros(shape, device=next(self.model.parameters()).device)


def _skip(*args: object, **kwargs: object) -> None:
    return None


def _allow(*args: object) -> bool:
    return True


_WHOLE_UNIFORMS_TARGET = "trainers.distributed.setup.default_sampler_stream"  # the private sampler's stream


def _whole_uniforms_stream() -> str:
    """The sampler before prefixes: one whole 53-bit uniform per example and step."""
    return COMPILED_STREAM


# Rows ``--only`` may name: dp-sgd with one part of its step taken out (measurements only: nothing is
# private), each as ``(options, patch)``; a part's cost in situ is dp-sgd's time less its row's.
ABLATIONS: dict[str, tuple[dict[str, object], Callable[[], contextlib.AbstractContextManager]]] = {
    "dp-sgd no-normals": ({}, lambda: mock.patch("trainers.methods.dp_sgd.DPSGD._normal", _zeros_on_model)),
    "dp-sgd no-budget": ({}, lambda: mock.patch("trainers.run.loop.budget_allows", _allow)),
    "dp-sgd no-accountant": (
        {},
        lambda: mock.patch("opu_hal.privacy.accountant.Accountant.step", _skip),
    ),
    "dp-sgd fixed-size": ({"sampling": "fixed"}, contextlib.nullcontext),
    "dp-sgd whole-uniforms": ({}, lambda: mock.patch(_WHOLE_UNIFORMS_TARGET, _whole_uniforms_stream)),
}
RUNS.update({name: {"noise_multiplier": 1.0, **options} for name, (options, _) in ABLATIONS.items()})
GOALS = {("dp-sgd", "bp"): 1.2, ("dp-dfa", "bp"): 1.2, ("dp-dfa (device)", "bp"): 1.3, ("pdfa", "dfa"): 2.0}
PROJECTION, PROJECTION_GOAL = (256, 784, 16384), 5.0


def epoch_seconds(name: str, data, compute: str) -> float:
    """The second epoch of a two-epoch run ``name`` (training steps only, as the loop times them): a
    run's first epoch also pays its one-time costs (first allocations, kernel launches' set-up), which
    the old benchmark's median of two epochs mostly left out and a steady-state ratio should."""
    method = name.split(" ")[0]
    options = {"hidden": (512, 512), "activation": "tanh", "batch_size": 256, **RUNS[name]}
    config = TrainConfig.for_method(method, epochs=2, alignment=False, compute=compute, **options)
    with ABLATIONS[name][1]() if name in ABLATIONS else contextlib.nullcontext():
        record = train(config, data=data, progress=False, log=lambda message: None)
    return float(record["epochs"][-1]["epoch_time_s"])


def epoch_rows(names: list[str], data, compute: str) -> dict[str, Timed]:
    return {name: (lambda name=name: epoch_seconds(name, data, compute)) for name in names}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of one epoch per run")
    parser.add_argument("--train", type=int, default=54_000)
    parser.add_argument("--compute", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument(
        "--only",
        default=None,
        help="comma-separated runs, the first the baseline (also the ablations: 'dp-sgd no-normals')",
    )
    parser.add_argument("--skip-projection", action="store_true", help="do not time the simulated projection")
    args = parser.parse_args()
    data = fashion_or_random(args.train)
    where = torch.cuda.get_device_name() if torch.cuda.is_available() and args.compute != "cpu" else "cpu"
    names = args.only.split(",") if args.only else [name for name in RUNS if name not in ABLATIONS]
    print(
        f"torch {torch.__version__}, compute {args.compute} ({where}), {args.train} examples, one warm-up epoch "
        f"per run, then {args.rounds} interleaved rounds; x {names[0]}: median [min-max] of the rounds' ratios"
    )
    rows = epoch_rows(names, data, args.compute)
    for row in rows.values():  # warm-up: CUDA context, kernels, allocator
        row()
    times = interleaved_times(rows, args.rounds, names[0])
    for name, ratio in ratios(times, names[0]).items():
        print(f"  {name:<22} {ratio.seconds:8.3f} s/epoch  {ratio} {names[0]}", flush=True)
    for (a, b), goal in GOALS.items():
        if a in times and b in times:
            ratio = ratios(times, b)[a]
            print(f"  {a}/{b} = {ratio}  (goal <= {goal}x: {'met' if ratio.median <= goal else 'NOT met'})")
    if not args.skip_projection:
        compute = "cuda" if where != "cpu" else "cpu"
        projection = interleaved_ratios(projection_rows(*PROJECTION, compute=compute), args.rounds, "matmul")
        linear, matmul = projection["simulated linear"], projection["matmul"]
        verdict = "met" if linear.median <= PROJECTION_GOAL else "NOT met"
        print(
            f"  simulated linear projection {PROJECTION} on {compute}: {linear.seconds * 1e3:.2f} ms against a matmul "
            f"{matmul.seconds * 1e3:.3f} ms = {linear} (goal <= {PROJECTION_GOAL}x on an H100: {verdict})"
        )
        three = projection.get("simulated linear, three reads")
        if three is not None:
            print(f"  the same as three separate fused reads: {three.seconds * 1e3:.2f} ms = {three}")


if __name__ == "__main__":
    main()
