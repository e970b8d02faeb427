"""The DP-MAC noise multiplier that spends a target epsilon over a whole run with learned bounds
(paper 003, section 2.4): the pre-training epochs and the per-layer DP histograms are charged to the
same ledger as training, so ``--target-epsilon`` (which plans the training steps only, then stops
at the target) would end the run early. Prints the noise multiplier (with ``--spent``, also the epsilon
the whole run spends at it, which the run's own record states from its accountant).

Usage: ``python scripts/reproduce/mac_noise.py EPSILON --train N --batch 50 --epochs 20 [--spent]``.
"""

from __future__ import annotations

import argparse
from dataclasses import astuple, dataclass

from opu_hal.privacy import Accountant, ComposedEvent, GaussianEvent, PoissonGaussianEvent, smallest_noise_multiplier


def mac_steps(train: int, batch: int, epochs: int, pretrain_epochs: int) -> int:
    """Poisson steps of the run: ``pretrain_epochs`` and ``epochs`` of ``train // batch`` each, as
    :class:`trainers.methods.dp_mac.DPMAC` and the Poisson sampler take them."""
    per_epoch = max(1, train // batch)
    return (pretrain_epochs + epochs) * per_epoch


@dataclass(frozen=True)
class MacRun:
    """The shape of a DP-MAC run with learned bounds: ``layers`` histograms of ``GaussianEvent(sigma_hist)``,
    then every Poisson step at rate ``batch / train`` of the pre-training and training epochs."""

    train: int
    batch: int
    epochs: int
    pretrain_epochs: int = 1
    layers: int = 3
    sigma_hist: float = 20.0

    def histograms(self) -> Accountant:
        """A ledger holding the histograms that learn the bounds."""
        spent = Accountant("add_remove")
        spent.step(ComposedEvent(tuple(GaussianEvent(self.sigma_hist) for _ in range(self.layers))))
        return spent

    @property
    def steps(self) -> int:
        return mac_steps(self.train, self.batch, self.epochs, self.pretrain_epochs)


def mac_run_epsilon(z: float, delta: float, run: MacRun) -> float:
    """The epsilon a whole DP-MAC ``run`` at noise multiplier ``z`` spends (the histograms, the
    pre-training epochs and the training epochs on one ledger), as its record will state it."""
    ledger = run.histograms()
    ledger.step(PoissonGaussianEvent(run.batch / run.train, z), run.steps)
    return ledger.get_epsilon(delta)


def mac_noise_multiplier(
    target_epsilon: float,
    delta: float,
    train: int,
    batch: int,
    epochs: int,
    pretrain_epochs: int = 1,
    layers: int = 3,
    sigma_hist: float = 20.0,
) -> float:
    """The smallest sigma whose run (:class:`MacRun`) spends at most ``target_epsilon`` at ``delta``."""
    if not 0 < batch <= train:
        raise ValueError(f"--batch {batch}: must be in [1, --train {train}]")
    run = MacRun(train, batch, epochs, pretrain_epochs, layers, sigma_hist)
    rate = batch / train
    return smallest_noise_multiplier(
        lambda z: PoissonGaussianEvent(rate, z), run.steps, target_epsilon, delta, "add_remove", spent=run.histograms()
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("epsilon", type=float, help="target epsilon of the whole run (> 0)")
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--train", type=int, required=True, help="training-split size")
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--pretrain-epochs", type=int, default=1)
    parser.add_argument("--layers", type=int, default=3, help="weight layers (one histogram each)")
    parser.add_argument("--sigma-hist", type=float, default=20.0)
    parser.add_argument(
        "--spent", action="store_true", help="also print the epsilon the whole run spends at that sigma"
    )
    args = parser.parse_args(argv)
    if args.epsilon <= 0:
        parser.error(f"epsilon {args.epsilon}: must be > 0")
    run = MacRun(args.train, args.batch, args.epochs, args.pretrain_epochs, args.layers, args.sigma_hist)
    z = mac_noise_multiplier(args.epsilon, args.delta, *astuple(run))
    if not args.spent:
        print(f"{z:.6g}")
        return
    z = float(f"{z:.6g}")  # the sigma the run is given, as printed
    spent = mac_run_epsilon(z, args.delta, run)
    print(f"{z:.6g} {spent!r}")


if __name__ == "__main__":
    main()
