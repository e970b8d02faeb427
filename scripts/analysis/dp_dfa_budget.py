"""How much of each layer's sensitivity budget DP-DFA's per-example updates use (issue 19: what
limits DP-DFA). Run from the repository root:

    python -m scripts.analysis.dp_dfa_budget [--model mlp|cnn] [--epochs E]

Every layer of DP-DFA is allotted the same per-example bound ``tau_c = gamma beta tau_e
sqrt(1 + tau_h^2)`` (paper 002, section 4.2; the noise is calibrated to it), but a layer's actual
per-example update is ``||delta_i|| sqrt(1 + ||clip(h_i)||^2)`` (linear layers, ``delta`` the DFA
signal, ``gamma beta e`` at the output) or the clipped conv gradient of the hybrid CNN. This prints,
per layer, the median and 90th percentile of that norm over 2048 training examples divided by
``tau_c``: the fraction of the budget the layer uses. ``--epochs E`` first trains the private run
(software noise, epsilon 8) for E epochs. Settings: the main job's MLP (3969-256-10 tanh, tau_e
0.05, tau_h 5), or the hybrid ScatterNet CNN of the sweep (16,32 / strides 2,1 / head 32, tau_h 1).
"""

from __future__ import annotations

import argparse

import torch

from trainers.core.clipping import clip_norm
from trainers.core.cnn import CNN
from trainers.core.per_example import conv_norms_and_sums
from trainers.methods.base import output_error
from trainers.run.config import TrainConfig
from trainers.run.loop import Trainer

SETTINGS = {
    "mlp": dict(hidden=(256,), tau_h=5.0, batch_size=2048, lr=1.5e-3),
    "cnn": dict(
        model="cnn", hidden=(16, 32), conv_strides=(2, 1), head_hidden=(32,), tau_h=1.0, batch_size=8192, lr=4e-3
    ),
}


def budget_use(trainer: Trainer, n: int = 2048) -> list[tuple[str, torch.Tensor]]:
    """Per layer: each example's update norm divided by the layer's bound ``tau_c``."""
    method, model, config = trainer.method, trainer.model, trainer.config
    x, y = trainer.data.train.x[:n], trainer.data.train.y[:n]
    cnn = isinstance(model, CNN)
    trace = model.trace(x) if cnn else model.forward_trace(x)
    preacts = trace.head_outputs if cnn else trace.preacts
    inputs = trace.head_inputs if cnn else trace.inputs
    deltas = method.deltas(output_error(trace.logits.detach(), y), preacts)
    out = []
    if cnn:
        grads = torch.autograd.grad((trace.head_outputs[0] * deltas[0]).sum(), trace.preacts)
        for index, (conv, h, g) in enumerate(zip(model.convs, trace.inputs, grads)):
            norms = conv_norms_and_sums(conv, h, g)[0].sqrt().clamp(max=method.conv_clip)
            out.append((f"conv {index + 1}", norms / method.conv_clip))
    for index, (delta, h) in enumerate(zip(deltas, inputs)):
        h = clip_norm(h.detach(), config.tau_h)
        norms = delta.norm(dim=1) * (1 + h.pow(2).sum(1)).sqrt()
        name = "output" if index == len(deltas) - 1 else f"linear {index + 1}"
        out.append((name, norms / method.conv_clip))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=tuple(SETTINGS), default="mlp")
    parser.add_argument("--epochs", type=int, default=0)
    args = parser.parse_args()
    config = TrainConfig.for_method(
        "dp-dfa",
        features="scatter",
        activation="tanh",
        tau_e=0.05,
        compute="cpu",
        target_epsilon=8.0,
        epochs=max(args.epochs, 1),
        alignment=False,
        **SETTINGS[args.model],
    )
    with Trainer(config, progress=False, log=lambda message: None) as trainer:
        if args.epochs:
            trainer.run(max_epochs=args.epochs)
        print(
            f"dp-dfa {args.model}, after {args.epochs} epoch(s): per-example update / tau_c "
            f"(tau_c = {trainer.method.conv_clip:.4g}; every layer is allotted 1.0)"
        )
        print(f"{'layer':>10} {'median':>8} {'p90':>8}")
        for name, use in budget_use(trainer):
            print(f"{name:>10} {float(use.median()):8.3f} {float(use.quantile(0.9)):8.3f}")


if __name__ == "__main__":
    main()
