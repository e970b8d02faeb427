"""The secure generator's privacy draws at a step's sizes, against numpy's (insecure) PCG64 in one run.

    python -m benchmarks.noise_draws [--repeats 10]

Best and median of ``--repeats`` calls, each returning fresh arrays as a training step gets them:

- 669 706 normals (one DP-SGD step of :mod:`benchmarks.private_vs_opacus`'s network) at 1 and 2 Numba
  threads, against ``numpy.random.default_rng().standard_normal`` (float32);
- 669 706 Poisson counts at means drawn in [1e3, 3e3] e- (``SecureGenerator.poisson_at``, a device-noise
  DP-DFA step's counts), against ``default_rng().poisson`` on the same means;
- the main job's digitized counts: 1 018 890 values of one read at means in [1 378, 2 900] e- on a 12-bit
  camera at 1 e-/DN (:func:`opu_hal.backends.simulated.speckle_digitized.pixel_counts`), against numpy's
  Poisson counts and normals of the same sizes;
- a private sampler's Poisson batch of 54 000 examples, its inclusions decided on 16-bit prefixes of their
  uniforms and, as before, on whole 53-bit uniforms, against numpy's ``random(n) < rate``;
- PTRS's first round read from the keystream (:func:`opu_hal.kernels.compiled.poisson_varying.first_round`)
  against the two-pass path (the round's uniforms drawn into an array first), the same counts, alternated in
  this process with a little torch work between draws, as in a training step.

To time another checkout, run it from there with ``PYTHONPATH=<checkout>``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from types import SimpleNamespace

import numpy as np

from benchmarks.timing import wall_seconds


def best_and_median(draw: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Shortest and median seconds of ``repeats`` timed calls of ``draw`` (after one untimed call)."""
    times = wall_seconds(draw, repeats)
    return min(times), statistics.median(times)


def rows(repeats: int) -> list[tuple[str, float, float, float]]:
    """(what, best s, median s, numpy's median s) per draw."""
    import torch

    from opu_hal.backends.simulated.speckle_digitized import pixel_counts
    from opu_hal.randomness.secure_random import SecureGenerator

    generator, pcg, rng = SecureGenerator(), np.random.default_rng(), np.random.default_rng(0)
    step, means = 669_706, rng.uniform(1e3, 3e3, 669_706)
    main_means = rng.uniform(1378.0, 2900.0, 1_018_890)
    camera = SimpleNamespace(full_well_e=1e4, read_noise_e=6.0, gain_e_per_dn=1.0, black_level_dn=10.0, max_dn=4095)
    out = []
    torch_threads = torch.get_num_threads()
    for threads in (1, 2):  # the secure draws follow torch's thread count (compute_threads), not Numba's
        torch.set_num_threads(threads)
        best, median = best_and_median(lambda: generator.standard_normal(step), repeats)
        numpy_median = best_and_median(lambda: pcg.standard_normal(step, np.float32), repeats)[1]
        out.append((f"{step} normals, {threads} thread(s)", best, median, numpy_median))
    torch.set_num_threads(torch_threads)
    best, median = best_and_median(lambda: generator.poisson_at(means), repeats)
    out.append(
        (f"{step} Poisson counts at 1e3-3e3 e-", best, median, best_and_median(lambda: pcg.poisson(means), repeats)[1])
    )
    doubled = np.repeat(main_means, 2)
    best, median = best_and_median(lambda: pixel_counts(generator, camera, main_means, 1), repeats)  # type: ignore[arg-type]
    numpy_median = best_and_median(lambda: (pcg.poisson(doubled), pcg.standard_normal(doubled.size)), repeats)[1]
    out.append(("the main job's digitized counts (1 018 890 values)", best, median, numpy_median))
    out += poisson_batch_rows(repeats, pcg)
    return out


def poisson_batch_rows(repeats: int, pcg: np.random.Generator) -> list[tuple[str, float, float, float]]:
    """A private sampler's Poisson batch of 54 000 examples at rate 256 / 54 000, its inclusions decided on
    16-bit prefixes, and as before (one whole 53-bit uniform per example), on one keyed stream."""
    from opu_hal.randomness.draws import bernoulli_indices
    from opu_hal.randomness.keyed_stream import keyed_stream
    from opu_hal.randomness.secure_random import new_secret_key

    stream, n, rate = keyed_stream(new_secret_key(), "batch", 0), 54_000, 256 / 54_000
    numpy_median = best_and_median(lambda: np.flatnonzero(pcg.random(n) < rate), repeats)[1]
    prefixes = best_and_median(lambda: stream.bernoulli_indices(n, rate), repeats)
    whole = best_and_median(lambda: bernoulli_indices(stream, n, rate), repeats)
    return [
        ("a Poisson batch of 54 000, 16-bit prefixes", *prefixes, numpy_median),
        ("a Poisson batch of 54 000, whole uniforms (before)", *whole, numpy_median),
    ]


def first_round_against_two_pass(repeats: int) -> tuple[float, float]:
    """Median seconds of ``poisson_at``'s counts on 669 706 means in [1e3, 3e3] e-: (two-pass, first round
    from the keystream), alternated ``4 repeats`` times."""
    import torch

    from opu_hal.kernels.compiled.poisson_varying import varying_mean_counts
    from opu_hal.randomness.secure_random import SecureGenerator

    generator, means = SecureGenerator(), np.random.default_rng(0).uniform(1e3, 3e3, 669_706)
    inputs, weights = torch.randn(256, 784), torch.randn(784, 512)
    draws = {
        "two-pass": lambda: varying_mean_counts(means, generator._counter_uniforms),
        "first round": lambda: varying_mean_counts(means, generator._counter_uniforms, generator._first_round),
    }
    times: dict[str, list[float]] = {name: [] for name in draws}
    for _ in range(4 * repeats + 1):
        for name, draw in draws.items():
            for _ in range(3):
                (inputs @ weights).sum()
            start = time.perf_counter()
            draw()
            times[name].append(time.perf_counter() - start)
    return statistics.median(times["two-pass"][1:]), statistics.median(times["first round"][1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    print(f"best / median of {args.repeats} calls; numpy's PCG64 (not a secure source) in the same run:")
    for what, best, median, numpy_median in rows(args.repeats):
        print(f"  {what:<52} {1e3 * best:8.2f} / {1e3 * median:8.2f} ms   {median / numpy_median:5.2f}x numpy's median")
    from opu_hal.randomness.secure_random import SecureGenerator

    if not hasattr(SecureGenerator, "_first_round"):  # a checkout from before the first round (PYTHONPATH)
        return
    two_pass, first = first_round_against_two_pass(args.repeats)
    print(
        f"PTRS's first round from the keystream {1e3 * first:.2f} ms against the two-pass path {1e3 * two_pass:.2f} ms "
        f"(medians, alternated): {first / two_pass:.2f}x"
    )


if __name__ == "__main__":
    main()
