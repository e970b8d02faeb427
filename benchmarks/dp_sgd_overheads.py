"""Where DP-SGD's epoch goes beyond a plain one: the same epoch with one part of the private step
taken out, interleaved with the plain epoch, and the secure normals' own parts at one thread.

    python -m benchmarks.dp_sgd_overheads [--rounds 5] [--train 54000] [--repeats 21]

The setting of :mod:`benchmarks.private_vs_opacus` (784-512-512-10 tanh, batch 256, Adam, epsilon 8).
Rows, each ratio taken to the plain epoch of its round (:mod:`benchmarks.interleave`):

- ``dp-sgd``: the private epoch as trained;
- ``without the normals``: its noise draw replaced by zeros (a measurement only: nothing is private);
- ``without the budget check``: the check before each step answered yes without asking the accountant;
- ``sampler before``: the Poisson sampler of before its 16-bit prefixes (a whole uniform per example).

A part's cost in situ is the full row's time less the row without it. Then the parts of one call of
:func:`opu_hal.kernels.compiled.chacha_normal32.standard_normals` for one step's normals at one thread
(best of ``--repeats``): the ChaCha20 keystream of the first proposals, the first pass over them, and
the ~1.5 % of proposals outside their rectangle (each reads a ChaCha20 block of its own substream).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import numba
import numpy as np
import torch
from numba import njit

from benchmarks.epoch_setup import epoch_parser, warmed_data
from benchmarks.gpu_training import ABLATIONS
from benchmarks.interleave import interleaved_ratios
from benchmarks.private_vs_opacus import ours, plain_epoch_seconds
from opu_hal.kernels.compiled import chacha_normal32 as normals32
from opu_hal.kernels.compiled.chacha import LANES, key_words

PLAIN, FULL, NO_NORMALS, NO_BUDGET = "plain", "dp-sgd", "without the normals", "without the budget check"
WHOLE = "dp-sgd, sampler before"  # the Poisson sampler reading one whole 53-bit uniform per example
STEP_NORMALS = 669_706  # one step's: the parameters of the 784-512-512-10 network


def epoch_rows(data, epsilon: float) -> dict[str, Callable[[], float]]:
    """The plain epoch and the three DP-SGD rows, each returning seconds an epoch."""

    def private() -> float:
        return ours("dp-sgd", data, 1, epsilon)[0]

    def patched(ablation: str) -> Callable[[], float]:
        def run() -> float:
            with ABLATIONS[ablation][1]():  # benchmarks.gpu_training's patch of the same part
                return private()

        return run

    return {
        PLAIN: lambda: plain_epoch_seconds(data),
        FULL: private,
        NO_NORMALS: patched("dp-sgd no-normals"),
        NO_BUDGET: patched("dp-sgd no-budget"),
        WHOLE: patched("dp-sgd whole-uniforms"),
    }


@njit(cache=True)
def _normals_up_to(key, out, stage):
    """The tasks of ``standard_normals`` on one thread, stopping after ``stage``: 0 the keystream, 1 the
    first pass, 2 everything (the outside proposals settled)."""
    x = np.empty((16, LANES), np.uint32)
    state = np.empty((16, LANES), np.uint32)
    for task in range((out.shape[0] + normals32.PER_TASK - 1) // normals32.PER_TASK):
        start, stop = task * normals32.PER_TASK, min(out.shape[0], (task + 1) * normals32.PER_TASK)
        words = np.empty(stop - start, np.uint32)
        normals32._task_words(key, np.uint64(0), np.uint32(2), start, words, x, state)
        if stage == 0:
            continue
        outside = np.zeros((stop - start + 7) // 8 * 8, np.bool_)
        normals32._first_proposals(words, out[start:stop], outside)
        if stage == 1:
            continue
        normals32._settle_outside(key, np.uint64(0), np.uint32(2), start, words, out[start:stop], outside, x, state)


def normals_parts(repeats: int) -> dict[str, float]:
    """Best seconds of each cumulative stage of one step's normals at one thread."""
    key, out = key_words(os.urandom(32)), np.empty(STEP_NORMALS, np.float32)
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        best = []
        for stage in (0, 1, 2):
            _normals_up_to(key, out, stage)  # compiled, caches warm
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                _normals_up_to(key, out, stage)
                times.append(time.perf_counter() - start)
            best.append(min(times))
    finally:
        numba.set_num_threads(threads)
    return {
        "keystream of the first proposals": best[0],
        "first pass (every proposal)": best[1] - best[0],
        "proposals outside their rectangle": best[2] - best[1],
        "total": best[2],
    }


def main() -> None:
    parser = epoch_parser(__doc__, rounds=5)
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    data = warmed_data("dp-sgd", args)
    steps = max(1, args.train // 256)
    ratios = interleaved_ratios(epoch_rows(data, args.epsilon), args.rounds, PLAIN)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; {args.rounds} interleaved rounds, {steps} steps an epoch"
    )
    for name, ratio in ratios.items():
        print(f"  {name:<26} {ratio.seconds:6.3f} s/epoch  {ratio} plain")
    full = ratios[FULL].seconds
    for name in (NO_NORMALS, NO_BUDGET):
        print(
            f"  cost of {name.removeprefix('without '):<18} {1e3 * (full - ratios[name].seconds) / steps:6.3f} ms a step"
        )
    extra = ratios[WHOLE].seconds - full
    print(f"  the sampler before its prefixes: {1e3 * extra / steps:+6.3f} ms a step against the current one")
    print(f"one step's {STEP_NORMALS} secure normals at one thread, best of {args.repeats}:")
    for name, seconds in normals_parts(args.repeats).items():
        print(f"  {name:<36} {1e3 * seconds:6.3f} ms")


if __name__ == "__main__":
    main()
