"""A small convolutional network for image inputs given flat: pixels ``(1, 28, 28)`` or ScatterNet
features ``(81, 7, 7)`` (Tramer and Boneh 2021 train such a CNN on ScatterNet features with DP-SGD).

Each entry of ``channels`` is one block: a ``kernel`` x ``kernel`` convolution (3 or 5, padding
``kernel // 2``), the activation, and a 2x2 pool (``pool``: average or max) while the side is at least
4; a linear layer reads the flattened result. With ``strides`` each block is instead a convolution of
that stride and the activation, no pooling; ``head`` puts hidden linear layers (each followed by
``head_activation``, default the convs' activation) before the last. Paper 002's section 5.1 network
is ``channels (64, 64)``, ``kernel 5``, ``pool "max"``, ``head (384, 384)``, tanh convs and a sigmoid
head for its hybrid.
Tramer and Boneh's ScatterNet CNN for (Fashion-)MNIST is ``channels (16, 32)``, ``strides (2, 1)``,
``head (32,)``. Methods with ``Method.trains_cnn`` train it: ``bp`` and ``dp-sgd`` by the true
gradient, ``dp-dfa`` as paper 002's hybrid BP/DFA network.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import torch
from torch import nn

from .errors import TrainingConfigError
from .model import get_activation
from .per_example import layer_bias

SCATTER_CHANNELS = 81


def image_shape(n_features: int, features: str = "pixels") -> tuple[int, int, int]:
    """``(channels, side, side)`` of a flat input: square pixels, or 81 scattering channels
    (3969 = 63^2 is also a square, so the kind of features decides, not the count)."""
    channels = SCATTER_CHANNELS if features == "scatter" else 1
    side = math.isqrt(n_features // channels)
    if channels * side * side != n_features:
        raise TrainingConfigError(
            f"--model cnn needs square images or ScatterNet features; "
            f"{n_features} input features ({features}) are neither"
        )
    return channels, side, side


@dataclass
class CNNTrace:
    """One forward pass: each conv's input and output (pre-activation); the input and output of each
    linear layer of the head (the flattened conv features first, the logits last)."""

    inputs: list[torch.Tensor]
    preacts: list[torch.Tensor]
    head_inputs: list[torch.Tensor]
    head_outputs: list[torch.Tensor]

    @property
    def logits(self) -> torch.Tensor:
        return self.head_outputs[-1]


KERNELS, POOLS = (3, 5), ("avg", "max")


class CNN(nn.Module):
    """``channels``: output channels of each conv block; ``strides``: their strides (no pooling;
    empty: stride 1 and 2x2 pooling); ``head``: hidden widths of the linear head before ``n_classes``."""

    def __init__(
        self,
        n_features: int,
        channels: Sequence[int],
        n_classes: int,
        activation: str = "tanh",
        seed: int = 0,
        features: str = "pixels",
        strides: Sequence[int] = (),
        head: Sequence[int] = (),
        kernel: int = 3,
        pool: str = "avg",
        head_activation: str | None = None,
    ) -> None:
        super().__init__()
        if kernel not in KERNELS or pool not in POOLS:
            raise TrainingConfigError(f"--conv-kernel {kernel}, --conv-pool {pool!r}: allowed {KERNELS} and {POOLS}")
        if not channels:
            raise TrainingConfigError("--model cnn needs at least one conv block: --hidden 32 (channels)")
        if strides and len(strides) != len(channels):
            raise TrainingConfigError(
                f"--conv-strides needs one stride per conv block ({len(channels)}), got {list(strides)}"
            )
        self.shape = image_shape(n_features, features)
        self.activation = get_activation(activation)
        self.head_activation = get_activation(head_activation or activation)
        self.pool = nn.functional.max_pool2d if pool == "max" else nn.functional.avg_pool2d
        self.hidden = [int(c) for c in channels]
        self.strides = [int(s) for s in strides] or [1] * len(self.hidden)
        generator = torch.Generator().manual_seed(seed)
        convs, pools = [], []
        width, side = self.shape[0], self.shape[1]
        for out, stride in zip(self.hidden, self.strides):
            convs.append(nn.Conv2d(width, out, kernel_size=kernel, padding=kernel // 2, stride=stride))
            pools.append(not strides and side >= 4)
            side = (side - 1) // stride + 1
            side = side // 2 if pools[-1] else side
            width = out
        # ModuleList registers the layers; typed as the list it behaves as (iteration yields Module)
        self.convs = cast("list[nn.Conv2d]", nn.ModuleList(convs))
        self.pools = pools
        widths = [width * side * side, *(int(w) for w in head)]
        self.fcs = cast("list[nn.Linear]", nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths, widths[1:])))
        self.head = nn.Linear(widths[-1], n_classes)
        with torch.no_grad():  # torch's default init, drawn from our own seeded stream
            layers: list[nn.Conv2d | nn.Linear] = [*self.convs, *self.fcs, self.head]
            for module in layers:
                fan_in = module.weight[0].numel()
                bound = 1 / fan_in**0.5
                bias = layer_bias(module)
                module.weight.copy_(torch.empty_like(module.weight).uniform_(-bound, bound, generator=generator))
                bias.copy_(torch.empty_like(bias).uniform_(-bound, bound, generator=generator))

    @property
    def hidden_widths(self) -> list[int]:
        return list(self.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.trace(x).logits

    def trace(self, x: torch.Tensor) -> CNNTrace:
        """Forward pass keeping what per-example gradients need (DP-SGD's CNN path)."""
        inputs, preacts = [], []
        h = x.reshape(x.shape[0], *self.shape)
        for conv, pool in zip(self.convs, self.pools):
            inputs.append(h)
            preacts.append(conv(h))
            h = self.activation.fn(preacts[-1])
            if pool:
                h = self.pool(h, 2)
        head_inputs, head_outputs = [h.flatten(1)], []
        for fc in self.fcs:
            head_outputs.append(fc(head_inputs[-1]))
            head_inputs.append(self.head_activation.fn(head_outputs[-1]))
        head_outputs.append(self.head(head_inputs[-1]))
        return CNNTrace(inputs, preacts, head_inputs, head_outputs)

    @property
    def linears(self) -> list[nn.Linear]:
        """The head's linear layers in order, the output layer last."""
        return [*self.fcs, self.head]
