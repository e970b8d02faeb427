"""How much absolute noise DP-DFA carries at a target epsilon under its two samplings (issue 35).
Run from the repository root:

    python -m scripts.analysis.dfa_sampling_noise [--dataset-size N] [--delta D]

Paper 002 draws fixed-size batches and is accounted under replace-one (``FixedSizeGaussianEvent``,
Wang-Balle-Kasiviswanathan 2019 Theorem 9): the clipped sum moves by ``2 C`` when one example is
replaced. ``--sampling poisson`` is accounted under add/remove (``PoissonGaussianEvent``): the sum
moves by ``C``. For each (batch, epochs, epsilon) this solves each noise multiplier ``z`` with the
project's accountant and prints the noise std on the clipped sum per unit ``C`` (``2 z`` and ``z``)
and their ratio. Add/remove is the relation DP-SGD and Opacus report.
"""

from __future__ import annotations

import argparse

from opu_hal.privacy import Accountant, FixedSizeGaussianEvent, PoissonGaussianEvent

SHAPES = ((2048, 15), (4096, 30), (8192, 60))


def noise_multiplier(make, neighboring: str, steps: int, epsilon: float, delta: float) -> float:
    """The smallest ``z`` (to 1e-4 relative) whose ``steps`` events spend at most ``epsilon``."""
    low, high = 0.2, 100.0
    while high - low > 1e-4 * high:
        middle = (low + high) / 2
        accountant = Accountant(neighboring)
        accountant.step(make(middle), steps)
        low, high = (middle, high) if accountant.get_epsilon(delta) > epsilon else (low, middle)
    return high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset-size", type=int, default=54000, help="training examples (default 54000)")
    parser.add_argument("--delta", type=float, default=1e-5)
    args = parser.parse_args()
    n = args.dataset_size
    print(
        "| batch | epochs | epsilon | fixed, replace-one: z / noise per C | poisson, add/remove: z / noise per C | ratio |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for batch, epochs in SHAPES:
        for epsilon in (3.0, 8.0):
            fixed = noise_multiplier(
                lambda z, batch=batch: FixedSizeGaussianEvent(n, batch, z),
                "replace_one",
                epochs * (n // batch),
                epsilon,
                args.delta,
            )
            poisson = noise_multiplier(
                lambda z, batch=batch: PoissonGaussianEvent(batch / n, z),
                "add_remove",
                epochs * (n // batch),
                epsilon,
                args.delta,
            )
            print(
                f"| {batch} | {epochs} | {epsilon:g} | {fixed:.3f} / {2 * fixed:.3f} | {poisson:.3f} / {poisson:.3f} "
                f"| {2 * fixed / poisson:.2f} |"
            )


if __name__ == "__main__":
    main()
