"""DP-SGD (Abadi et al.), the baseline: per-example clipping to ``C``, Gaussian noise, sampling
the accountant assumes.

Per-example gradient norms come from the linear-layer identity ("ghost clipping"): for a layer
with input ``a_i`` and output gradient ``g_i``, the per-example weight gradient ``g_i a_i^T`` has
``||g_i a_i^T||_F = ||g_i|| ||a_i||`` and the bias gradient ``||g_i||``. So one backward pass to the
pre-activations gives every norm, and the clipped sum is ``(c * G)^T A`` per layer, with no
per-example gradient ever materialised.

Sampling: ``poisson`` (default; add/remove adjacency, ``PoissonGaussianEvent``, sum divided by
the expected batch ``q N``, noise std ``z C``) or ``fixed`` (size ``m`` without replacement,
replace-one adjacency, ``FixedSizeGaussianEvent``, sum sensitivity ``2 C``, noise std ``2 z C``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
import torch.nn.functional as F

from opu_hal.privacy import Event, FixedSizeGaussianEvent, PoissonGaussianEvent
from opu_hal.randomness.secure_random import SecureGenerator

from ..core.cnn import CNN
from ..core.errors import TrainingConfigError
from ..core.per_example import (
    clip_scale,
    conv_norms_and_sums,
    linear_clipped_sum,
    linear_clipped_sum_into,
    linear_squared_norms,
    weights_and_biases,
)
from .base import GaussianNoiseMethod, MethodContext, StepOutput
from .private_defaults import DP_SGD_DEFAULTS


def summed(terms: Iterable[torch.Tensor]) -> torch.Tensor:
    """``sum(terms)``, the same additions from ``0``, typed as the tensor it is (the builtin's
    ``Tensor | int``); refuses an empty sum (a model without layers)."""
    total = sum(terms)
    if not isinstance(total, torch.Tensor):
        raise ValueError("dp-sgd: no per-example squared norms to sum: the model has no layers")
    return total


class DPSGD(GaussianNoiseMethod):
    name = "dp-sgd"
    any_network = True
    trains_cnn = True
    private = True
    single_release = True  # one noisy release per step, through release() (the audit hooks it)
    sampling = "poisson"
    relation_follows_sampling = True
    defaults = DP_SGD_DEFAULTS  # trainers.methods.private_defaults: defaults that learn

    def __init__(self, model, context: MethodContext) -> None:
        super().__init__(model, context)
        config = context.config
        if config.noise_source != "software":
            raise TrainingConfigError(
                "dp-sgd adds software Gaussian noise only; drop --noise-source device (the device-noise "
                "mechanism is dp-dfa's)"
            )
        self.sampling = config.sampling or "poisson"
        self.generator = SecureGenerator()
        self.neighboring = self.neighboring_for(config)
        # Noise std per unit of the multiplier: the L2 sensitivity of the clipped sum.
        self.sensitivity = config.clip_norm * (1 if self.sampling == "poisson" else 2)
        self.dimension = sum(p.numel() for p in model.parameters())

    def event_for(self, z: float) -> Event:
        ctx = self.context
        if self.sampling == "poisson":
            return PoissonGaussianEvent(ctx.config.batch_size / ctx.dataset_size, z)
        return FixedSizeGaussianEvent(ctx.dataset_size, ctx.config.batch_size, z)

    def describe(self) -> dict[str, Any]:
        return {
            "noise_multiplier": self.noise_multiplier,
            "clip_norm": self.context.config.clip_norm,
            "sampling": self.sampling,
            "mechanism": "gaussian",
            "generator": self.generator.name,
            "noise_std_on_sum": self.noise_std,
        }

    def _normal(self, shape: torch.Size) -> torch.Tensor:
        return self.generator.standard_normal(shape.numel(), next(self.model.parameters()).device).view(shape)

    def state_dict(self) -> dict[str, Any]:
        """The secure generator's state (secret: checkpoints only), so resumed steps replay exactly."""
        return {"generator": self.generator.secret_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.generator = SecureGenerator.from_secret_state(state["generator"])

    def release_update(self, u: torch.Tensor) -> torch.Tensor:
        """The noisy release of the flattened clipped SUM ``u`` (sensitivity ``self.sensitivity``):
        ``u + N(0, (z Delta)^2 I)`` from the secure generator (the audit's white-box hook)."""
        noise = self._normal(u.shape)
        return torch.add(u, noise, alpha=self.noise_std, out=noise)  # one pass, into the noise's own memory

    def compute_gradients(self, x: torch.Tensor, y: torch.Tensor) -> StepOutput:
        if isinstance(self.model, CNN):
            return self._cnn_gradients(self.model, x, y)
        layers = self.model.layers
        trace = self.model.forward_trace(x)
        losses = F.cross_entropy(trace.logits, y, reduction="none")
        output_grads = self._output_grads(losses, trace.preacts)
        with torch.no_grad():
            inputs = [a.detach() for a in trace.inputs]
            squared = summed(linear_squared_norms(g, a) for g, a in zip(output_grads, inputs))
            scale = self._clip_scale(squared)
            flat, offset = x.new_empty(self.dimension), 0  # the clipped sum, each layer's in place
            for g, a in zip(output_grads, inputs):
                offset = linear_clipped_sum_into(g, a, scale, flat, offset)
            self._release([p for layer in layers for p in (layer.weight, layer.bias)], flat)
        return self._output(losses, trace.logits, y)

    def _cnn_gradients(self, model: CNN, x: torch.Tensor, y: torch.Tensor) -> StepOutput:
        """A CNN (:class:`trainers.core.cnn.CNN`): per-example conv gradients formed once from the input
        patches and kept (book-keeping), the head's linear layers by the identity above
        (:mod:`trainers.core.per_example`). Each example's
        whole gradient is clipped to ``C``; the clipped sum is released and divided as above."""
        trace = model.trace(x)
        losses = F.cross_entropy(trace.logits, y, reduction="none")
        grads = self._output_grads(losses, [*trace.preacts, *trace.head_outputs])
        conv_grads, head_grads = grads[: len(model.convs)], grads[len(model.convs) :]
        with torch.no_grad():
            head_inputs = [a.detach() for a in trace.head_inputs]
            convs = [conv_norms_and_sums(conv, h, g) for conv, h, g in zip(model.convs, trace.inputs, conv_grads)]
            squared = summed(linear_squared_norms(g, a) for g, a in zip(head_grads, head_inputs))
            squared = squared + summed(norms for norms, _ in convs)
            scale = self._clip_scale(squared)
            parts = [part for _, clipped_sums in convs for part in clipped_sums(scale)]
            parts += [part for g, a in zip(head_grads, head_inputs) for part in linear_clipped_sum(g, a, scale)]
            params = weights_and_biases([*model.convs, *model.linears])
            self._release(params, torch.cat(parts))
        return self._output(losses, trace.logits, y)

    @staticmethod
    def _output_grads(losses: torch.Tensor, outputs: list[torch.Tensor]) -> list[torch.Tensor]:
        """Per-example gradients of the loss at each layer's output (zeros for an empty batch)."""
        if losses.numel():
            return list(torch.autograd.grad(losses.sum(), outputs))
        return [torch.zeros_like(z) for z in outputs]

    def _clip_scale(self, squared_norms: torch.Tensor) -> torch.Tensor:
        """Per-example factor ``min(1, C / ||grad_i||)``."""
        return clip_scale(squared_norms, self.context.config.clip_norm)

    def _release(self, params: list[torch.Tensor], flat: torch.Tensor) -> None:
        """Release the flat clipped sum (in ``params`` order), divided by the batch size (the
        expected batch ``q N`` for Poisson, ``m`` for fixed), into every ``.grad``."""
        released = self.release(flat)
        if self._release_hook is None and self._aggregator is None:  # release_update's own fresh tensor
            released = released.div_(self.context.config.batch_size)
        else:  # a hook (the audit) or the ranks' aggregation may keep what it returned
            released = released / self.context.config.batch_size
        for param, part in zip(params, released.split([p.numel() for p in params])):
            param.grad = part.view_as(param)  # disjoint views of a fresh tensor: no copy needed

    def _output(self, losses: torch.Tensor, logits: torch.Tensor, y: torch.Tensor) -> StepOutput:
        correct = int((logits.argmax(1) == y).sum()) if y.numel() else 0
        return StepOutput(float(losses.detach().sum()), correct, int(y.shape[0]), privacy_event=self.planned_event())
