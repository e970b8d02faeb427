"""How much of DP-ULR's clipped proxy sum points along the gradient DP-SGD would release (paper 004,
eq. 4; what separates DP-ULR from DP-SGD at the same sigma_0). Run from the repository root:

    python -m scripts.analysis.ulr_alignment [--epochs E] [--n 500]

Both methods add N(0, sigma_0^2 C^2) to a sum of per-example terms clipped to C. DP-SGD's term is
the example's gradient; DP-ULR's is a likelihood-ratio estimate of it from K noisy forward passes,
mostly estimator noise at the forward std the run uses, so after clipping little of its norm C lies
along the gradient. Measured on ``n`` training examples of MNIST (paper 004's Table 1 setting: MLP
128-64-32-10 GELU, DP-ULR gaussian mode with the clean-loss baseline), at initialization and, with
``--epochs E``, after E epochs of the private DP-ULR run (sigma_0 4, batch 500):

- ``r = <S_ulr, S_sgd> / ||S_sgd||^2`` with ``S = sum_i clip_C(term_i)``: the share of DP-SGD's
  clipped signal that DP-ULR's sum carries; at equal noise DP-ULR is DP-SGD with noise multiplier
  ``sigma_0 / r`` and extra estimator noise of norm ``||S_ulr - r S_sgd||``.
- the median per-example cosine between the proxy and the gradient.
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F

from opu_hal.randomness.secure_random import keyed_generator, new_secret_key
from trainers.core import ulr
from trainers.core.clipping import clip_norm
from trainers.core.model import MLP
from trainers.run.config import TrainConfig
from trainers.run.loop import Trainer


def per_example_gradients(model: MLP, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``(n, d)``: each example's loss gradient over every layer's ``[W, b]``, rows as DP-ULR's proxy."""
    rows = []
    for xi, yi in zip(x, y):
        model.zero_grad(set_to_none=True)
        F.cross_entropy(model(xi[None]), yi[None]).backward()
        rows.append(torch.cat([torch.cat([la.weight.grad, la.bias.grad[:, None]], 1).flatten() for la in model.layers]))
    return torch.stack(rows)


def per_example_proxies(model: MLP, x: torch.Tensor, y: torch.Tensor, std: float, repeats: int) -> torch.Tensor:
    """``(n, d)``: DP-ULR's per-example proxies ``e x~^T`` (eq. 4, clean-loss baseline) for all layers."""
    generator = keyed_generator(new_secret_key(), "forward", 0)
    with torch.no_grad():
        trace = model.forward_trace(x)
        clean = F.cross_entropy(trace.logits, y, reduction="none")
        parts = []
        for index in range(len(model.layers)):
            z, losses = ulr.noisy_losses(model, trace, index, y, std, repeats, generator)
            factor = ulr.lr_factor(z, losses - clean, std)
            parts.append((factor[:, :, None] * ulr.with_bias(trace.inputs[index])[:, None, :]).flatten(1))
    return torch.cat(parts, dim=1)


def alignment(model: MLP, x: torch.Tensor, y: torch.Tensor, std: float, repeats: int, clip: float) -> dict[str, float]:
    """``r``, the estimator noise's norm, and the median per-example cosine (module docstring)."""
    grads = per_example_gradients(model, x, y)
    proxies = per_example_proxies(model, x, y, std, repeats)
    s_sgd, s_ulr = clip_norm(grads, clip).sum(0), clip_norm(proxies, clip).sum(0)
    r = float(s_ulr @ s_sgd / (s_sgd @ s_sgd))
    cosines = F.cosine_similarity(proxies, grads, dim=1)
    return {
        "r": r,
        "sgd_signal": float(s_sgd.norm()),
        "ulr_estimator_noise": float((s_ulr - r * s_sgd).norm()),
        "median_cosine": float(cosines.median()),
        "d": float(grads.shape[1]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=0, help="epochs of the private DP-ULR run first")
    parser.add_argument("--n", type=int, default=500, help="training examples measured (one batch)")
    args = parser.parse_args()
    config = TrainConfig.for_method(
        "dp-ulr",
        dataset="mnist",
        features="pixels",
        hidden=(128, 64, 32),
        activation="gelu",
        optimizer="adam",
        lr=0.01,
        lr_schedule="constant",
        weight_average=0.0,
        batch_size=500,
        noise_multiplier=4.0,
        sampling="rejection",
        epochs=max(args.epochs, 1),
        alignment=False,
        compute="cpu",
        extra={"mode": "gaussian", "baseline": True},
    )
    with Trainer(config, progress=False, log=lambda message: None) as trainer:
        if args.epochs:
            trainer.run(max_epochs=args.epochs)
        options, sigma0 = trainer.method.options, trainer.method.noise_multiplier
        x, y = trainer.data.train.x[: args.n], trainer.data.train.y[: args.n]
        found = alignment(trainer.model, x, y, options["forward_std"], options["repeats"], config.clip_norm)
    privacy_noise = sigma0 * config.clip_norm * math.sqrt(found["d"])
    print(f"dp-ulr on MNIST after {args.epochs} epoch(s), {args.n} examples, forward std {options['forward_std']}")
    print(f"  DP-SGD's clipped signal ||S_sgd||           {found['sgd_signal']:.4g}")
    print(f"  share DP-ULR carries r                       {found['r']:.4g}")
    print(f"  DP-ULR's estimator noise ||S_ulr - r S_sgd|| {found['ulr_estimator_noise']:.4g}")
    print(f"  privacy noise norm sigma_0 C sqrt(d)         {privacy_noise:.4g} (d = {int(found['d'])})")
    print(f"  median per-example cosine(proxy, gradient)   {found['median_cosine']:.4g}")
    print(f"  equivalent DP-SGD noise multiplier sigma_0 / r {sigma0 / found['r']:.4g}")


if __name__ == "__main__":
    main()
