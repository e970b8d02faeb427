"""How often Student's bounds and the anchor map's own bounds fail on skewed reads (Poisson counts plus
read noise).

    python -m scripts.analysis.t_bound_skew [--maps 2000000] [--seed 1]

One pixel per map, ``F = 64`` reads at 1 e-/DN (black 10 DN), Student's bounds at a per-pixel level ``q``
(a Student lower bound fails when ``t > t_q``, an upper bound when ``t < -t_q``), the map's Chernoff upper
bound (:mod:`opu_hal.calibration.anchor_upper`, the read noise known) and its Bernstein lower bound
(:mod:`opu_hal.calibration.anchor_lower`, which replaced Student's). Prints the failure rates against ``q``
for a few means.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

from opu_hal.calibration.anchor_lower import bernstein_floor_dn
from opu_hal.calibration.anchor_upper import chernoff_rise_dn, pooled_read_variance_dn2

FRAMES = 64
CASES = ((4.0, 3.0), (20.0, 3.0), (200.0, 6.0), (1400.0, 6.0))  # mean, read noise (e-)
LEVELS = (1e-3, 1e-4, 1e-5)
CHUNK = 400_000


def failure_rates(mean: float, noise: float, maps: int, rng: np.random.Generator) -> dict[float, tuple[float, ...]]:
    """Per level ``q``: (Student lower, Student upper, Chernoff upper, Bernstein lower) failures per map."""
    counts = {q: [0, 0, 0, 0] for q in LEVELS}
    read_var = pooled_read_variance_dn2(noise, 1.0)
    critical = {q: stats.t.isf(q, FRAMES - 1) for q in LEVELS}
    for start in range(0, maps, CHUNK):
        n = min(CHUNK, maps - start)
        reads = np.rint(rng.poisson(mean, (n, FRAMES)) + rng.normal(0.0, noise, (n, FRAMES))) + 10.0
        spread = np.maximum(reads.std(axis=1, ddof=1), np.sqrt(1 / 12))  # the map's floor on s_j
        t = (reads.mean(axis=1) - (mean + 10.0)) / (spread / np.sqrt(FRAMES))
        for q, c in critical.items():
            counts[q][0] += int(np.count_nonzero(t > c))
            counts[q][1] += int(np.count_nonzero(t < -c))
            rise = chernoff_rise_dn(reads.mean(axis=1), FRAMES, q, 10.0, 1.0, read_var)
            counts[q][2] += int(np.count_nonzero(rise < mean))
            floor = bernstein_floor_dn(reads.mean(axis=1), FRAMES, q, (10.0, 10.0), 1.0, read_var)
            counts[q][3] += int(np.count_nonzero(floor > mean))
    return {q: tuple(n / maps for n in row) for q, row in counts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--maps", type=int, default=2_000_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(
        "mean, read noise (e-) | "
        + " | ".join(f"level {q:g}: Student lower / upper, Chernoff upper, Bernstein lower fails" for q in LEVELS)
    )
    for mean, noise in CASES:
        rates = failure_rates(mean, noise, args.maps, rng)
        print(
            f"{mean:g}, {noise:g} | "
            + " | ".join(f"{lo:.2e} / {hi:.2e}, {ch:.2e}, {be:.2e}" for lo, hi, ch, be in rates.values())
        )


if __name__ == "__main__":
    main()
