"""Device noise under Poisson sampling against fixed-size batches: what each sampling needs, and how
loose the general Poisson bound is on the one mechanism whose exact curve is known.

    python -m scripts.analysis.poisson_lattice

1. The main job's shape (54,000 examples, batch 2048, 792 steps, d = 1,018,890, k = 23, per-coordinate
   rounding): the noise multiplier of the lattice event for a target epsilon under fixed-size
   batches (replace-one, sensitivity 2C) and Poisson sampling (add/remove, C), and the noise std on
   the update in units of C.
2. Zhu and Wang's general bound (Theorem 6) on the Gaussian mechanism against dp-accounting's exact
   Poisson subsampled Gaussian: the ratio of epsilons after the main job's 792 steps at delta 1e-5.
"""

from __future__ import annotations

import numpy as np
from dp_accounting.rdp.rdp_privacy_accountant import _compute_rdp_poisson_subsampled_gaussian, compute_epsilon

from opu_hal.privacy.run_shape import RunShape
from opu_hal.privacy.skellam import required_poisson_mean
from opu_hal.privacy.subsampling import poisson_subsampled_rdp

N, M, STEPS, D, K = 54_000, 2048, 792, 1_018_890, 23.0


def noise_table(targets: tuple[float, ...] = (1.0, 3.0, 5.352, 8.0)) -> None:
    print("target eps | fixed: z, std/C | poisson: z, std/C | fixed / poisson std")
    for target in targets:
        row = []
        for sampling, factor in (("fixed", 2.0), ("poisson", 1.0)):
            shape = RunShape(
                sampling, N, M, STEPS, dimension=D, lattice_resolution=K, rounding_analysis="per-coordinate"
            )
            z = (2 * required_poisson_mean(target, 1e-5, shape)) ** 0.5 / K
            row.append((z, z * factor))
        (zf, sf), (zp, sp) = row
        print(f"{target:10.3f} | {zf:.3f}, {sf:.3f} | {zp:.3f}, {sp:.3f} | {sf / sp:.2f}")


def gaussian_check(sigmas: tuple[float, ...] = (0.8, 1.0, 1.5, 2.0, 3.0)) -> None:
    orders = np.arange(2, 65, dtype=np.float64)
    q = M / N
    print("sigma | exact Poisson Gaussian eps | general bound eps | ratio")
    for sigma in sigmas:
        exact = np.asarray(_compute_rdp_poisson_subsampled_gaussian(q, sigma, list(orders))) * STEPS
        ours = poisson_subsampled_rdp(lambda a, s=sigma: a / (2 * s**2), q, orders) * STEPS
        e_exact, e_ours = compute_epsilon(orders, exact, 1e-5)[0], compute_epsilon(orders, ours, 1e-5)[0]
        print(f"{sigma:5.2f} | {e_exact:.3f} | {e_ours:.3f} | {e_ours / e_exact:.3f}")


if __name__ == "__main__":
    noise_table()
    print()
    gaussian_check()
