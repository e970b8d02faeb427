"""Attacks on the released update of one DP-DFA step (``--noise-source device``), through the real
trainer code path (issue 12). Run from the repository root, on any commit:

    python -m scripts.attacks.dp_dfa_release [--trials 100] [--profile opu-sim-dp]

For each trial the attacker knows the model, the public seeds (profile, config) and two neighbouring
batches (one example replaced), computes both noiseless updates exactly, and guesses which batch
was used from the released update:

- lattice: the candidate for which ``(release - u) / step`` is closest to integral, where ``step`` is
  the smallest spacing of the released noise (found from the release itself);
- replay: rebuild the device noise from the public seeds (a second device built from the same
  profile, reading the same reference input) and pick the candidate with the smaller residual.

It prints each attack's success rate (0.5 is chance).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

import opu_hal
from trainers.core.model import MLP
from trainers.methods import METHODS, MethodContext
from trainers.run.config import TrainConfig


def _flat_grads(model) -> torch.Tensor:
    return torch.cat([p.grad.detach().flatten().double() for p in model.parameters()])


def build(profile: str, seed: int):
    config = TrainConfig.for_method(
        "dp-dfa", noise_source="device", profile=profile, noise_multiplier=1.0, batch_size=16, hidden=(8, 8), seed=seed
    )
    device = opu_hal.load_device(profile)
    model = MLP([20, 8, 8, 10], config.activation, seed=seed)
    method = METHODS["dp-dfa"](model, MethodContext(config, device, 20, 10, 1000))
    method.set_noise_multiplier(1.0)
    return config, method


def noiseless(method, x, y) -> torch.Tensor:
    """The exact clipped update, computed by the attacker with the release switched off."""
    saved = {}
    for name in ("_add_noise", "release_update"):
        if hasattr(method, name):
            saved[name] = getattr(method, name)
            setattr(method, name, (lambda *a, **k: None) if name == "_add_noise" else (lambda u: u))
    try:
        method.compute_gradients(x, y)
    finally:
        for name, fn in saved.items():
            setattr(method, name, fn)
    return _flat_grads(method.model)


def lattice_guess(release: torch.Tensor, candidates: list[torch.Tensor]) -> int:
    noise = release - candidates[0]
    values = torch.unique(torch.round(noise.abs() * 1e9) / 1e9)
    gaps = torch.diff(values)
    step = float(gaps[gaps > 1e-7].min()) if (gaps > 1e-7).any() else 1.0
    miss = [float(((release - u) / step - torch.round((release - u) / step)).abs().sum()) for u in candidates]
    return int(np.argmin(miss))


def replay_guess(release: torch.Tensor, candidates: list[torch.Tensor], profile: str, seed: int) -> int:
    _, twin = build(profile, seed)  # the attacker's twin: same profile, same public seeds
    twin.compute_gradients(*_batch(0, seed, replaced=False))
    rebuilt = _flat_grads(twin.model) - noiseless(twin, *_batch(0, seed, replaced=False))
    residual = [float((release - rebuilt - u).abs().max()) for u in candidates]
    return int(np.argmin(residual))


def _batch(trial: int, seed: int, replaced: bool):
    g = torch.Generator().manual_seed(1000 + trial)
    x = torch.rand(16, 20, generator=g)
    y = torch.randint(0, 10, (16,), generator=g)
    if replaced:
        x = x.clone()
        x[0] = x[0] + 1e-4
    return x, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--profile", default="opu-sim")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(12)
    wins = {"lattice": 0, "replay": 0}
    for trial in range(args.trials):
        truth = int(rng.integers(2))
        candidates = []
        for replaced in (False, True):
            _, attacker = build(args.profile, args.seed)
            candidates.append(noiseless(attacker, *_batch(trial, args.seed, replaced)))
        _, victim = build(args.profile, args.seed)
        victim.compute_gradients(*_batch(trial, args.seed, replaced=bool(truth)))
        release = _flat_grads(victim.model)
        wins["lattice"] += int(lattice_guess(release, candidates) == truth)
        # Replay: only the first trial's noise stream is rebuilt identically, so compare at trial 0's state.
        _, victim = build(args.profile, args.seed)
        victim.compute_gradients(*_batch(0, args.seed, replaced=bool(truth)))
        release0 = _flat_grads(victim.model)
        candidates0 = [noiseless(build(args.profile, args.seed)[1], *_batch(0, args.seed, r)) for r in (False, True)]
        wins["replay"] += int(replay_guess(release0, candidates0, args.profile, args.seed) == truth)
    separation = float((candidates[1] - candidates[0]).norm())
    for name, count in wins.items():
        print(f"{name:8s} attack: {count}/{args.trials} correct ({count / args.trials:.2f}; chance 0.50)")
    print(f"(last trial: the two candidate updates differ by {separation:.3g} in L2)")


if __name__ == "__main__":
    main()
