"""Direct feedback alignment: hidden layers learn from ``(B^{l+1} e) * phi'(z^l)`` (paper 000, eq. 4).

The projection ``B e`` is the device's (any linear, real-input profile; a torch profile gives DFA
on GPU/CPU). One projection covers every hidden layer (see :mod:`trainers.core.feedback`).
"""

from __future__ import annotations

import torch

from ..core.errors import TrainingConfigError
from ..core.feedback import DeviceFeedback, FeedbackProjection
from .base import Method, MethodContext, StepOutput, forward_and_error, set_linear_grads


class DFA(Method):
    name = "dfa"
    uses_device = True
    ternary = False
    default_profile = "torch-auto"

    def __init__(self, model, context: MethodContext) -> None:
        super().__init__(model, context)
        if context.device is None:
            raise TrainingConfigError(f"method {self.name!r} needs a device profile")
        self.check_device(context)
        self.feedback = DeviceFeedback(
            context.device,
            context.n_classes,
            model.hidden_widths,
            ternary=self.ternary,
            threshold=context.config.threshold,
        )

    def check_device(self, context: MethodContext) -> None:
        """Method-specific refusal of an unsuitable device (see subclasses)."""

    def project(self, e: torch.Tensor) -> FeedbackProjection:
        return self.feedback.project(e)

    def compute_gradients(self, x: torch.Tensor, y: torch.Tensor) -> StepOutput:
        opening = forward_and_error(self.model, x, y)
        trace, e = opening.trace, opening.error
        with torch.no_grad():
            m = y.shape[0]
            feedback = self.project(e)
            layers = self.model.layers
            derivative = self.model.activation.derivative
            for index, projected in enumerate(feedback.slices):
                delta = projected * derivative(trace.preacts[index]) / m
                set_linear_grads(layers[index], delta, trace.inputs[index])
            set_linear_grads(layers[-1], e / m, trace.inputs[-1])
        return StepOutput(opening.loss_sum, opening.correct, m, noise=feedback.noise)
