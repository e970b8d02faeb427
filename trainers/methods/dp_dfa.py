"""DP-DFA (Lee and Kifer, paper 002, Algorithm 1, sections 4.1-4.2).

Feedback matrices ``B^{l+1}`` are Gaussian rescaled to spectral norm ``beta``; the error is
clipped to ``tau_e`` and each layer's input to ``tau_h`` (L2, per example); Gaussian noise of std
``noise_std = z * Delta`` is added to every averaged update (lines 15-16); minibatches of fixed size
``m`` are drawn without replacement and accounted by ``FixedSizeGaussianEvent`` (replace-one).

Sensitivity (section 4.2), per layer: ``2 gamma_l beta_{l+1} tau_e sqrt(1 + tau_h^2) / m``, and
``Delta = 2 gamma beta tau_e sqrt((1 + tau_h^2) L) / m`` for ``L`` equal terms. Doubt, kept
visible: the output layer is updated with ``e`` itself (``B = I``, no ``phi'``), whose term is
``2 tau_e sqrt(1 + tau_h^2) / m``, larger than the formula's when ``gamma beta < 1``. Here the
output layer's update is multiplied by ``gamma beta`` so that every layer has the same term (the
equal allocation the paper uses for its hybrid networks) and the formula holds as stated.

``noise_source="device"``: the noise comes from the device's measurement noise
(:mod:`trainers.device_noise`), scaled so its std is at least ``noise_std``; accounting uses
``noise_std``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch

from opu_hal.privacy import FixedSizeGaussianEvent

from ..clipping import clip_norm
from ..device_noise import DeviceNoise
from ..errors import TrainingConfigError
from ..sampling import step_generator
if TYPE_CHECKING:
    from ..config import TrainConfig
from .base import GaussianNoiseMethod, MethodContext, StepOutput, forward_and_error, set_linear_grads


def spectral_feedback(rows: int, cols: int, beta: float, generator: torch.Generator) -> torch.Tensor:
    """Gaussian ``(rows, cols)`` matrix rescaled to spectral norm ``beta`` (Algorithm 1, line 1)."""
    matrix = torch.randn(rows, cols, generator=generator)
    return matrix * (beta / torch.linalg.matrix_norm(matrix, ord=2))


class DPDFA(GaussianNoiseMethod):
    name = "dp-dfa"
    private = True
    neighboring = "replace_one"
    sampling = "fixed"
    # Paper 002, section 5: Adam (lr 1e-3), beta = 0.9, tau_e = 0.1; 128-256 sigmoid, batch 128.
    defaults = {"inputs": "unit", "optimizer": "adam", "lr": 1e-3, "hidden": (128, 256),
                "activation": "sigmoid", "batch_size": 128}

    @classmethod
    def profile_for(cls, config: "TrainConfig") -> str | None:
        if config.profile is None and config.noise_source == "device":
            return "opu-sim"
        return super().profile_for(config)

    def __init__(self, model, context: MethodContext) -> None:
        super().__init__(model, context)
        config = context.config
        if (config.sampling or "fixed") != "fixed":
            raise TrainingConfigError("dp-dfa samples fixed-size minibatches (paper 002, Algorithm 1); drop --sampling")
        generator = step_generator(config.seed, "feedback", 0)
        self.feedback = [spectral_feedback(width, context.n_classes, config.beta, generator)
                         for width in model.hidden_widths]
        m = config.batch_size
        gamma = model.activation.gamma_max
        clip_factor = math.sqrt(1 + config.tau_h**2)
        self.output_scale = min(1.0, gamma * config.beta)
        terms = [2 * gamma * config.beta * config.tau_e * clip_factor / m for _ in model.hidden_widths]
        terms.append(2 * self.output_scale * config.tau_e * clip_factor / m)
        self.layer_sensitivities = terms
        self.sensitivity = math.sqrt(sum(t * t for t in terms))
        self.device_noise: DeviceNoise | None = None
        if config.noise_source == "device":
            if context.device is None:
                raise TrainingConfigError("--noise-source device needs --profile (e.g. opu-sim)")
            self.device_noise = DeviceNoise(context.device, seed=config.seed)
            self.replayable = False

    # -- accounting ----------------------------------------------------------------------------
    def event_for(self, z: float) -> FixedSizeGaussianEvent:
        return FixedSizeGaussianEvent(self.context.dataset_size, self.context.config.batch_size, z)

    def describe(self) -> dict[str, Any]:
        return {"noise_multiplier": self.noise_multiplier, "sensitivity": self.sensitivity,
                "layer_sensitivities": self.layer_sensitivities, "noise_std": self.noise_std,
                "noise_source": self.context.config.noise_source,
                "device_projections_for_noise": self.device_noise.projections if self.device_noise else 0}

    # -- noise -----------------------------------------------------------------------------------
    def _noise(self, count: int) -> torch.Tensor:
        if self.device_noise is not None:
            return self.noise_std * self.device_noise.standard(count)
        return self.noise_std * torch.randn(count, generator=step_generator(self.context.config.seed, "noise",
                                                                         self.current_step))

    def _add_noise(self) -> None:
        params = [p for layer in self.model.layers for p in (layer.weight, layer.bias)]
        sizes = [p.numel() for p in params]
        noise = self._noise(sum(sizes)).split(sizes)
        for p, n in zip(params, noise):
            p.grad.add_(n.view_as(p))

    # -- update ----------------------------------------------------------------------------------
    def compute_gradients(self, x: torch.Tensor, y: torch.Tensor) -> StepOutput:
        config = self.context.config
        opening = forward_and_error(self.model, x, y)
        trace = opening.trace
        with torch.no_grad():
            m = config.batch_size
            e = clip_norm(opening.error, config.tau_e)
            derivative = self.model.activation.derivative
            deltas = [(e @ b.T) * derivative(z) for b, z in zip(self.feedback, trace.preacts)]
            deltas.append(self.output_scale * e)
            for layer, delta, h in zip(self.model.layers, deltas, trace.inputs):
                set_linear_grads(layer, delta / m, clip_norm(h, config.tau_h))
            self._add_noise()
        report = self.device_noise.last_report if self.device_noise else None
        return StepOutput(opening.loss_sum, opening.correct, int(y.shape[0]), noise=report,
                          privacy_event=self.planned_event())
