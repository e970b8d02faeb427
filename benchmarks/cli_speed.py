"""Wall time of command-line answers that should not import torch: best of ``--repeats`` runs each.

    python -m benchmarks.cli_speed [--repeats 5] [--base PATH]

``--base PATH``: also time a checkout of another commit (run with ``PYTHONPATH=PATH`` from that
folder), alternating the two on every try, so load from other jobs falls on both alike. The help
facts (``trainers/cli/help_facts.py``) are computed once first. Goals: each ``--help`` <= 0.5 s,
``devices`` <= 1 s.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = {
    "opu-hal --help": ["--help"],
    "train --help": ["train", "--help"],
    "tune --help": ["tune", "--help"],
    "audit --help": ["audit", "--help"],
    "plan --help": ["plan", "--help"],
    "calibrate --help": ["calibrate", "--help"],
    "devices": ["devices"],
    "a missing file (train --profile /nonexistent.toml)": [
        "train",
        "--method",
        "dp-dfa",
        "--target-epsilon",
        "3",
        "--profile",
        "/nonexistent.toml",
    ],
}
GOALS = {"--help": 0.5, "devices": 1.0}


def seconds(argv: list[str], checkout: Path) -> float:
    """Wall time of ``opu-hal ARGV`` run from ``checkout`` with it first on the import path."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "import sys; from opu_hal.cli import main; sys.exit(main())", *argv],
        cwd=checkout,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="tries per command (the best is printed)")
    parser.add_argument("--base", type=Path, default=None, help="another checkout to time alongside")
    args = parser.parse_args()
    seconds(["train", "--help"], ROOT)  # computes and stores the help facts
    checkouts = {"current": ROOT, **({"base": args.base.resolve()} if args.base else {})}
    print(f"best of {args.repeats}; " + ", ".join(f"{name}: {path}" for name, path in checkouts.items()))
    for label, argv in COMMANDS.items():
        best = dict.fromkeys(checkouts, float("inf"))
        for _ in range(args.repeats):
            for name, path in checkouts.items():
                best[name] = min(best[name], seconds(argv, path))
        goal = next((g for key, g in GOALS.items() if label.endswith(key)), None)
        verdict = "" if goal is None else f"  (goal <= {goal} s: {'met' if best['current'] <= goal else 'NOT met'})"
        print(f"  {label:<52} " + "  ".join(f"{name} {s:6.2f} s" for name, s in best.items()) + verdict)


if __name__ == "__main__":
    main()
