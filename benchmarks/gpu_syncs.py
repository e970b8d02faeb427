"""Where a training step waits for the GPU: host synchronizations per step, by call site.

    python -m benchmarks.gpu_syncs [--steps 20] [--only bp,dp-sgd,dp-dfa] [--out results/gpu]

A step on a small network is launch-bound: each synchronization drains the queue, so the host's
launch overhead and the device's work stop overlapping. Trains ``--steps`` steps of each run of
:mod:`benchmarks.gpu_training` under ``torch.cuda.set_sync_debug_mode("warn")`` (after a warm-up
run of the same length) and prints, per run, the synchronizations per step and the project's call
sites that caused them (the innermost frame in ``opu_hal/``, ``trainers/`` or ``benchmarks/``),
most frequent first; ``OUT/syncs-<run>.txt`` keeps the full list. Needs CUDA.
"""

from __future__ import annotations

import argparse
import traceback
import warnings
from collections import Counter
from pathlib import Path

import torch

from benchmarks.data import fashion_or_random
from benchmarks.gpu_training import RUNS
from trainers.run.config import TrainConfig
from trainers.run.loop import train

PROJECT = ("/opu_hal/", "/trainers/", "/benchmarks/")


def call_site(stack: list[traceback.FrameSummary]) -> str:
    """The innermost frame of the project's own code in ``stack`` (``file:line function``)."""
    for frame in reversed(stack):
        if any(part in frame.filename for part in PROJECT) and "gpu_syncs" not in frame.filename:
            short = frame.filename.split("/")[-2:]
            return f"{'/'.join(short)}:{frame.lineno} {frame.name}"
    return "(outside the project)"


def census(name: str, data, steps: int) -> tuple[int, Counter[str]]:
    """The synchronizations of ``steps`` training steps of run ``name``, by call site."""
    method = name.split(" ")[0]
    options = {"hidden": (512, 512), "activation": "tanh", "batch_size": 256, **RUNS[name]}
    config = TrainConfig.for_method(
        method, epochs=1, alignment=False, compute="cuda", train_limit=256 * steps, **options
    )
    quiet = {"progress": False, "log": lambda message: None}
    train(config, data=data, **quiet)  # warm-up: kernels, caches
    sites: Counter[str] = Counter()
    original = warnings.showwarning

    def record(message, category, filename, lineno, file=None, line=None) -> None:
        if "synchroniz" in str(message):
            sites[call_site(traceback.extract_stack())] += 1

    warnings.showwarning = record
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = record
            train(config, data=data, **quiet)
    finally:
        torch.cuda.set_sync_debug_mode("default")
        warnings.showwarning = original
    return sum(sites.values()), sites


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--only", default="bp,dp-sgd,dp-dfa")
    parser.add_argument("--out", default="results/gpu")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gpu_syncs needs CUDA")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = fashion_or_random(256 * args.steps)
    for name in args.only.split(","):
        total, sites = census(name, data, args.steps)
        print(f"  {name:<16} {total / args.steps:6.1f} synchronizations per step (evaluation included)")
        for site, count in sites.most_common(8):
            print(f"      {count / args.steps:6.2f}/step  {site}")
        listing = "\n".join(f"{count}\t{site}" for site, count in sites.most_common())
        out.joinpath(f"syncs-{name.replace(' ', '_')}.txt").write_text(listing + "\n")


if __name__ == "__main__":
    main()
