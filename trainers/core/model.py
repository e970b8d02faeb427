"""The multilayer perceptron every method trains, with the quantities DFA needs exposed.

``forward_trace`` returns, per layer ``l``, its input ``h^{l-1}`` and pre-activation ``z^l``
(paper 002, eq. 1-2; paper 000, eq. 1-3), so update rules can be written as in the papers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import torch
from torch import nn

from .errors import TrainingConfigError


@dataclass(frozen=True)
class Activation:
    """An element-wise nonlinearity, its derivative and the bounds ``gamma_min <= |phi'| <= gamma_max``;
    ``derivative_at_output``, where set, gives the same ``phi'(z)`` from the output ``phi(z)`` that a
    forward pass already holds (one elementwise function fewer than ``derivative``)."""

    name: str
    fn: Callable[[torch.Tensor], torch.Tensor]
    derivative: Callable[[torch.Tensor], torch.Tensor]
    gamma_min: float
    gamma_max: float
    derivative_at_output: Callable[[torch.Tensor], torch.Tensor] | None = None


def _tanh_derivative_at_output(h: torch.Tensor) -> torch.Tensor:
    """``1 - h^2`` at ``h = tanh(z)``."""
    return 1 - h * h


def _tanh_derivative(z: torch.Tensor) -> torch.Tensor:
    return _tanh_derivative_at_output(torch.tanh(z))


def _sigmoid_derivative_at_output(s: torch.Tensor) -> torch.Tensor:
    return s * (1 - s)


def _sigmoid_derivative(z: torch.Tensor) -> torch.Tensor:
    return _sigmoid_derivative_at_output(torch.sigmoid(z))


def _relu_derivative(z: torch.Tensor) -> torch.Tensor:
    return (z > 0).to(z.dtype)


def _gelu_derivative(z: torch.Tensor) -> torch.Tensor:
    """``Phi(z) + z phi(z)``; lies in [-0.1290, 1.1290] (paper 004's MLP uses GELU)."""
    return 0.5 * (1 + torch.erf(z / 2**0.5)) + z * torch.exp(-0.5 * z * z) / (2 * torch.pi) ** 0.5


def _softplus_derivative(z: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(z)


ACTIVATIONS: dict[str, Activation] = {
    "tanh": Activation("tanh", torch.tanh, _tanh_derivative, 0.0, 1.0, _tanh_derivative_at_output),
    "sigmoid": Activation("sigmoid", torch.sigmoid, _sigmoid_derivative, 0.0, 0.25, _sigmoid_derivative_at_output),
    "relu": Activation("relu", torch.relu, _relu_derivative, 0.0, 1.0),
    "gelu": Activation("gelu", torch.nn.functional.gelu, _gelu_derivative, 0.0, 1.129),
    "softplus": Activation("softplus", torch.nn.functional.softplus, _softplus_derivative, 0.0, 1.0),
}


def get_activation(name: str) -> Activation:
    try:
        return ACTIVATIONS[name]
    except KeyError:
        raise TrainingConfigError(f"unknown activation {name!r}; choose one of {', '.join(ACTIVATIONS)}") from None


@dataclass
class Trace:
    """One forward pass: layer inputs ``h^{l-1}``, pre-activations ``z^l`` and the logits."""

    inputs: list[torch.Tensor]
    preacts: list[torch.Tensor]
    logits: torch.Tensor


class MLP(nn.Module):
    """Fully connected network ``sizes[0] -> ... -> sizes[-1]``; hidden layers use ``activation``,
    the output layer is linear (softmax lives in the loss)."""

    def __init__(self, sizes: Sequence[int], activation: str = "tanh", seed: int = 0) -> None:
        super().__init__()
        if len(sizes) < 2 or any(int(s) < 1 for s in sizes):
            raise TrainingConfigError(f"MLP sizes must be >= 2 positive integers, got {list(sizes)}")
        self.sizes = [int(s) for s in sizes]
        self.activation = get_activation(activation)
        generator = torch.Generator().manual_seed(seed)
        # a ModuleList (registered parameters) typed as the Linears it holds: its items read as Module
        self.layers = cast(
            "list[nn.Linear]", nn.ModuleList(nn.Linear(a, b) for a, b in zip(self.sizes[:-1], self.sizes[1:]))
        )
        with torch.no_grad():
            for layer in self.layers:  # torch's default init, drawn from our own seeded stream
                bound = 1 / layer.in_features**0.5
                layer.weight.copy_(torch.empty_like(layer.weight).uniform_(-bound, bound, generator=generator))
                layer.bias.copy_(torch.empty_like(layer.bias).uniform_(-bound, bound, generator=generator))

    @property
    def hidden_widths(self) -> list[int]:
        return self.sizes[1:-1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for layer in self.layers[:-1]:
            h = self.activation.fn(layer(h))
        return self.layers[-1](h)

    def forward_trace(self, x: torch.Tensor) -> Trace:
        """Forward pass keeping every layer's input and pre-activation."""
        inputs, preacts = [], []
        h = x
        for index, layer in enumerate(self.layers):
            inputs.append(h)
            z = layer(h)
            preacts.append(z)
            h = self.activation.fn(z) if index < len(self.layers) - 1 else z
        return Trace(inputs=inputs, preacts=preacts, logits=h)

    def layer_names(self) -> list[str]:
        n = len(self.layers)
        return [f"layer{i + 1}" if i < n - 1 else "output" for i in range(n)]
