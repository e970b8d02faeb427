"""DP-DFA's feedback matrices and L2 sensitivity (Lee and Kifer, paper 002, Algorithm 1 line 1 and
section 4.2); the derivation and its kept doubt are in :mod:`trainers.methods.dp_dfa`. The loop's
:class:`~trainers.methods.dp_dfa.DPDFA` and ``trainers.api``'s dp-dfa both read these."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


def spectral_feedback(rows: int, cols: int, beta: float, generator: torch.Generator) -> torch.Tensor:
    """Gaussian ``(rows, cols)`` matrix rescaled to spectral norm ``beta`` (Algorithm 1, line 1)."""
    matrix = torch.randn(rows, cols, generator=generator)
    return matrix * (beta / torch.linalg.matrix_norm(matrix, ord=2))


@dataclass(frozen=True)
class DFASensitivity:
    """Section 4.2's per-layer L2 sensitivities of the averaged update (:mod:`trainers.methods.dp_dfa`): ``convs``
    conv layers and ``hidden`` DFA layers at ``2 tau_c / m`` each, ``tau_c = gamma beta tau_e
    sqrt(1 + tau_h^2)``, and the output layer (scaled by ``min(1, gamma beta)``) at
    ``2 min(1, gamma beta) tau_e sqrt(1 + tau_h^2) / m``. The one place the formula is computed
    (the loop's :class:`~trainers.methods.dp_dfa.DPDFA` and ``trainers.api``'s dp-dfa both read it)."""

    gamma: float
    beta: float
    tau_e: float
    tau_h: float
    batch_size: int
    hidden: int
    convs: int = 0
    replace_one: bool = True  # fixed-size batches (replace-one): factor 2; Poisson (add/remove): 1

    @property
    def output_scale(self) -> float:
        return min(1.0, self.gamma * self.beta)

    @property
    def conv_clip(self) -> float:
        return self.gamma * self.beta * self.tau_e * math.sqrt(1 + self.tau_h**2)

    @property
    def terms(self) -> list[float]:
        m, factor = self.batch_size, math.sqrt(1 + self.tau_h**2)
        two = 2 if self.replace_one else 1  # one example replaced moves two terms; added or removed, one
        return [two * self.conv_clip / m] * (self.convs + self.hidden) + [
            two * self.output_scale * self.tau_e * factor / m
        ]

    @property
    def total(self) -> float:
        return math.sqrt(sum(t * t for t in self.terms))
