"""Examples per second of data-parallel training against the number of ranks (1, 2, ...).

``python -m benchmarks.distributed [--ranks 1,2] [--method dp-dfa] [--noise-source device] ...``
starts ``torchrun --standalone --nproc_per_node=W -m opu_hal train ...`` for each W in the same
run, reads each result record's training time (``final.wall_time_s``: the epochs' wall time, not
process start-up) and steps, and prints examples per second and the ratio against 1 rank measured
in this run, naming the machine (CPU model and cores, or the GPU). Each rank runs with
``OMP_NUM_THREADS=1`` so the ranks, not intra-op threads, use the cores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import torch


def machine() -> str:
    """The CPU model and core count (and the GPU when CUDA is present)."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    text = f"{model}, {os.cpu_count()} cores"
    if torch.cuda.is_available():
        text += f", {torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}"
    return text


def run(ranks: int, train_args: list[str], workdir: Path) -> dict:
    out = workdir / f"ranks-{ranks}.json"
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={ranks}",
        "-m",
        "opu_hal",
        "train",
        *train_args,
        "--quiet",
        "--out",
        str(out),
    ]
    subprocess.run(command, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.DEVNULL)
    record = json.loads(out.read_text())
    final = record["final"]
    examples = final["steps"] * int(record["hyperparameters"]["batch_size"])
    return {
        "ranks": ranks,
        "steps": final["steps"],
        "seconds": final["wall_time_s"],
        "examples_per_s": examples / final["wall_time_s"],
        "test_accuracy": final["test_accuracy"],
        "epsilon": final.get("epsilon"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="1,2", help="comma-separated world sizes (default 1,2)")
    parser.add_argument("--method", default="dp-dfa")
    args, train_args = parser.parse_known_args(argv)
    if not train_args:
        train_args = [
            "--noise-source",
            "device",
            "--noise-multiplier",
            "1.0",
            "--train-limit",
            "8192",
            "--epochs",
            "1",
            "--batch-size",
            "512",
            "--hidden",
            "256",
            "--compute",
            "cpu",
        ]
    sizes = [int(part) for part in args.ranks.split(",")]
    print(f"machine: {machine()}; torch {torch.__version__}")
    print(f"opu-hal train --method {args.method} {' '.join(train_args)}")
    with tempfile.TemporaryDirectory() as tmp:
        results = [run(w, ["--method", args.method, *train_args], Path(tmp)) for w in sizes]
    base = next((r for r in results if r["ranks"] == 1), results[0])
    print(
        f"{'ranks':>5} {'steps':>6} {'train s':>8} {'examples/s':>11} {'vs 1 rank':>9} {'test acc':>8} {'epsilon':>8}"
    )
    for r in results:
        eps = f"{r['epsilon']:.4g}" if r["epsilon"] is not None else "-"
        print(
            f"{r['ranks']:>5} {r['steps']:>6} {r['seconds']:>8.2f} {r['examples_per_s']:>11.1f} "
            f"{r['examples_per_s'] / base['examples_per_s']:>9.2f} {r['test_accuracy']:>8.4f} {eps:>8}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
