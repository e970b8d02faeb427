"""The main job's settings through the Python API (``PrivacyEngine``) and through the CLI's loop.

    python -m benchmarks.api_parity [--epochs 20] [--train-limit N] [--profile opu-sim-dp]
    python -m benchmarks.api_parity --opacus-cnn [--epochs 2] [--train-limit 8000] [--repeats 5]

``--opacus-cnn``: the row against Opacus instead, dp-sgd on Opacus's CIFAR-10 CNN with GroupNorm
(:mod:`benchmarks.opacus_cnn`).

The settings of ``scripts/main.sh``: DP-DFA with device noise (the lattice Skellam mechanism on
``opu-sim-dp``, calibrated first, as the script does), ScatterNet features of FashionMNIST, one
hidden layer of 256 tanh units, epsilon 8 at delta 1e-5 over ``--epochs`` epochs, batch 2048 (fixed
size), Adam lr 1.5e-3, tau_h 5, tau_e 0.05, lattice resolution 23, feedback and weights from seed 0.

The loop side is :class:`trainers.run.loop.Trainer` (what ``train()`` and ``opu-hal train`` run), driven
one epoch at a time with ``run(max_epochs=1)``; the API side is a plain torch loop over
``make_private_with_epsilon``'s loader on an ``nn.Sequential`` holding the loop's initial weights,
trained on the loop's prepared features (the user's data). Epochs alternate between the two (which
one goes first alternates too), so the machine's load falls on both alike; an epoch's time is its
training steps only (the loop's ``epoch_time_s``; evaluation excluded on both sides). Goals
(issue 30): API epoch <= 1.05x the loop's (ratio of medians), same epsilon, test accuracy within
0.5 point.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from trainers.api import PrivacyEngine, calibrate, calibrated_device
from trainers.core.evaluation import evaluate
from trainers.core.model import MLP
from trainers.run.config import TrainConfig
from trainers.run.loop import Trainer

#: scripts/main.sh's training settings (its calibration: temperature 25 C, exposure 400 us).
MAIN = dict(
    method="dp-dfa",
    noise_source="device",
    features="scatter",
    hidden=(256,),
    target_epsilon=8.0,
    delta=1e-5,
    epochs=20,
    batch_size=2048,
    optimizer="adam",
    lr=1.5e-3,
    activation="tanh",
    tau_h=5.0,
    tau_e=0.05,
    lattice_resolution=23.0,
)
GOAL_RATIO, GOAL_POINTS = 1.05, 0.5


def sequential_like(mlp: MLP) -> nn.Sequential:
    """The user's model: an ``nn.Sequential`` with ``mlp``'s weights (same start for both sides)."""
    layers: list[nn.Module] = []
    for i, layer in enumerate(mlp.layers):
        copy = nn.Linear(layer.in_features, layer.out_features)
        copy.load_state_dict(layer.state_dict())
        layers += [copy] if i == len(mlp.layers) - 1 else [copy, nn.Tanh()]
    return nn.Sequential(*layers)


def goal_lines(ratio: float, eps_api: float, eps_loop: float, acc_api: float, acc_loop: float) -> str:
    met = lambda ok: "met" if ok else "NOT met"  # noqa: E731
    points = 100 * abs(acc_api - acc_loop)
    return "\n".join(
        [
            f"per-epoch time API / loop: {ratio:.3f}x (goal <= {GOAL_RATIO}x): {met(ratio <= GOAL_RATIO)}",
            f"epsilon API {eps_api:.6f}, loop {eps_loop:.6f}: {met(abs(eps_api - eps_loop) <= 1e-9 * eps_loop)}",
            f"test accuracy API {acc_api:.4f}, loop {acc_loop:.4f}: {points:.2f} points apart "
            f"(goal <= {GOAL_POINTS}): {met(points <= GOAL_POINTS)}",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=None, help="default 20 (2 with --opacus-cnn)")
    parser.add_argument("--train-limit", type=int, default=None, help="first N training examples (default all)")
    parser.add_argument("--profile", default="opu-sim-dp")
    parser.add_argument("--opacus-cnn", action="store_true", help="dp-sgd on Opacus's CNN + GroupNorm against Opacus")
    parser.add_argument("--repeats", type=int, default=1, help="with --opacus-cnn: runs per side, interleaved")
    args = parser.parse_args(argv)
    if args.opacus_cnn:
        from benchmarks import opacus_cnn

        opacus_cnn.main(
            train=args.train_limit or opacus_cnn.TRAIN, epochs=args.epochs or opacus_cnn.EPOCHS, repeats=args.repeats
        )
        return
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        cal = Path(tmp) / "calibration.json"
        calibrate(args.profile, temperatures=[25.0], exposures=[400.0], out=cal)
        config = TrainConfig.for_method(
            **{**MAIN, "epochs": args.epochs or MAIN["epochs"]},
            profile=args.profile,
            calibration=str(cal),
            train_limit=args.train_limit,
            alignment=False,
        )
        log: list[str] = []
        trainer = Trainer(config, progress=False, log=log.append)
        model = sequential_like(trainer.model)
        engine = PrivacyEngine()
        optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
        model, optimizer, loader = engine.make_private_with_epsilon(
            module=model,
            optimizer=optimizer,
            data_loader=(trainer.train_split.x, trainer.train_split.y),
            target_epsilon=config.target_epsilon,
            target_delta=config.delta,
            epochs=config.epochs,
            max_grad_norm=config.tau_e,
            batch_size=config.batch_size,
            method="dp-dfa",
            noise_source="device",
            opu=calibrated_device(args.profile, cal),
            tau_h=config.tau_h,
            beta=config.beta,
            lattice_resolution=config.lattice_resolution,
            feedback_seed=config.seed,
        )
        print(
            f"{len(trainer.train_split)} training examples, {len(loader)} steps per epoch, {config.epochs} epochs; "
            f"noise multiplier API {engine.noise_multiplier:.6f}, loop {trainer.method.noise_multiplier:.6f}",
            flush=True,
        )
        api_times, loop_times = [], []

        def api_epoch() -> None:
            start = time.perf_counter()
            for xb, yb in loader:
                optimizer.zero_grad()
                F.cross_entropy(model(xb), yb).backward()
                optimizer.step()
            api_times.append(time.perf_counter() - start)

        def loop_epoch() -> None:
            trainer.run(max_epochs=1)
            loop_times.append(trainer.epochs[-1]["epoch_time_s"])

        for epoch in range(config.epochs):
            for side in (api_epoch, loop_epoch) if epoch % 2 == 0 else (loop_epoch, api_epoch):
                side()
            print(f"epoch {epoch + 1}: API {api_times[-1]:.2f} s, loop {loop_times[-1]:.2f} s", flush=True)
        trainer.close()
        with torch.no_grad():
            _, acc_api = evaluate(model, trainer.data.test)
        acc_loop = trainer.epochs[-1]["test_accuracy"]
        ratio = statistics.median(api_times) / statistics.median(loop_times)
        print(
            goal_lines(
                ratio, engine.get_epsilon(config.delta), trainer.accountant.get_epsilon(config.delta), acc_api, acc_loop
            )
        )


if __name__ == "__main__":
    main()
