"""The secure generator's CPU normals against randomgen's ChaCha20 ziggurat, in one run.

    python -m benchmarks.secure_normals [--n 669706] [--repeats 15]

``n`` float32 standard normals (default: one DP-SGD step of the 784-512-512-10 network of
:mod:`benchmarks.private_vs_opacus`), best of ``--repeats``, at one and two Numba threads:
``SecureGenerator().standard_normal`` (the 32-bit ziggurat on the compiled ChaCha20 keystream,
:mod:`opu_hal.kernels.compiled.chacha_normal32`), randomgen's ChaCha20 (20 rounds) under numpy's
float32 ziggurat in one stream (the secure fallback without Numba), and numpy's PCG64 (not a secure
source: the floor a fast insecure generator sets). Ratios are to randomgen's time in the same run.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from benchmarks.noise_draws import best_and_median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=669_706)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    import numba
    from randomgen import ChaCha

    from opu_hal.randomness.secure_random import SecureGenerator

    ours = SecureGenerator()
    chacha = np.random.Generator(ChaCha(key=int.from_bytes(os.urandom(32), "little"), rounds=20))
    pcg = np.random.default_rng()
    for threads in (1, 2):
        numba.set_num_threads(threads)
        rows = {
            "opu-hal (compiled ChaCha20, 32-bit ziggurat)": lambda: ours.standard_normal(args.n),
            "randomgen ChaCha20, numpy ziggurat, one stream": lambda: chacha.standard_normal(args.n, np.float32),
            "numpy PCG64 (not secure)": lambda: pcg.standard_normal(args.n, np.float32),
        }
        seconds = {name: best_and_median(draw, args.repeats)[0] for name, draw in rows.items()}
        baseline = seconds["randomgen ChaCha20, numpy ziggurat, one stream"]
        print(f"{args.n} float32 normals, {threads} Numba thread(s), best of {args.repeats}:")
        for name, value in seconds.items():
            print(f"  {name:<48} {1e3 * value:7.3f} ms  {value / baseline:5.2f}x randomgen")


if __name__ == "__main__":
    main()
