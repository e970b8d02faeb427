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

from typing import Any

import torch
import torch.nn.functional as F

from opu_hal.privacy import Event, FixedSizeGaussianEvent, PoissonGaussianEvent

from opu_hal.secure_random import SecureGenerator

from ..errors import TrainingConfigError
from ..cnn import CNN
from .base import GaussianNoiseMethod, MethodContext, StepOutput

PER_EXAMPLE_CHUNK = 256  # examples per batched matmul (bounds the per-example conv gradients in memory)


class DPSGD(GaussianNoiseMethod):
    name = "dp-sgd"
    any_network = True
    private = True
    sampling = "poisson"
    defaults = {"inputs": "unit", "optimizer": "adam", "lr": 1e-3, "hidden": (128, 256),
                "activation": "sigmoid", "batch_size": 128}

    def __init__(self, model, context: MethodContext) -> None:
        super().__init__(model, context)
        config = context.config
        if config.noise_source != "software":
            raise TrainingConfigError(
                "dp-sgd adds software Gaussian noise only; drop --noise-source device (the device-noise "
                "mechanism is dp-dfa's)")
        self.sampling = config.sampling or "poisson"
        self.generator = SecureGenerator()
        self.neighboring = "add_remove" if self.sampling == "poisson" else "replace_one"
        # Noise std per unit of the multiplier: the L2 sensitivity of the clipped sum.
        self.sensitivity = config.clip_norm * (1 if self.sampling == "poisson" else 2)
        self.dimension = sum(p.numel() for p in model.parameters())

    def event_for(self, z: float) -> Event:
        ctx = self.context
        if self.sampling == "poisson":
            return PoissonGaussianEvent(ctx.config.batch_size / ctx.dataset_size, z)
        return FixedSizeGaussianEvent(ctx.dataset_size, ctx.config.batch_size, z)

    def describe(self) -> dict[str, Any]:
        return {"noise_multiplier": self.noise_multiplier, "clip_norm": self.context.config.clip_norm,
                "sampling": self.sampling, "mechanism": "gaussian", "generator": self.generator.name,
                "noise_std_on_sum": self.noise_std}

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
        return u + self.noise_std * self._normal(u.shape)

    def compute_gradients(self, x: torch.Tensor, y: torch.Tensor) -> StepOutput:
        if isinstance(self.model, CNN):
            return self._cnn_gradients(x, y)
        layers = self.model.layers
        activation = self.model.activation.fn
        inputs, preacts = [], []
        h = x
        for index, layer in enumerate(layers):
            inputs.append(h.detach())
            z = layer(h.detach()) if index == 0 else layer(h)
            preacts.append(z)
            h = activation(z) if index < len(layers) - 1 else z
        losses = F.cross_entropy(h, y, reduction="none")
        output_grads = self._output_grads(losses, preacts)
        with torch.no_grad():
            squared = sum(_linear_squared_norms(g, a) for g, a in zip(output_grads, inputs))
            scale = self._clip_scale(squared)
            parts = [part for g, a in zip(output_grads, inputs) for part in _linear_clipped_sum(g, a, scale)]
            self._release([p for layer in layers for p in (layer.weight, layer.bias)], parts)
        return self._output(losses, h, y)

    def _cnn_gradients(self, x: torch.Tensor, y: torch.Tensor) -> StepOutput:
        """A CNN (:class:`trainers.cnn.CNN`): per-example gradients of each 3x3 convolution are
        ``G_i = g_i U_i^T`` with ``U_i`` the unfolded input patches (at the conv's stride) and
        ``g_i`` the gradient at the conv's output, formed by one batched matmul per chunk of
        :data:`PER_EXAMPLE_CHUNK` examples; the head's linear layers use the identity of the MLP
        path. Each example's whole gradient is clipped to ``C``; the clipped sum is released and
        divided as above."""
        model = self.model
        trace = model.trace(x)
        patches = [F.unfold(h.detach(), kernel_size=3, padding=1, stride=conv.stride)  # (n, C_in 9, P)
                   for h, conv in zip(trace.inputs, model.convs)]
        losses = F.cross_entropy(trace.logits, y, reduction="none")
        grads = self._output_grads(losses, [*trace.preacts, *trace.head_outputs])
        conv_grads, head_grads = grads[:len(model.convs)], grads[len(model.convs):]
        with torch.no_grad():
            head_inputs = [a.detach() for a in trace.head_inputs]
            flat_grads = [g.flatten(2) for g in conv_grads]  # (n, C_out, P)
            squared = sum(_linear_squared_norms(g, a) for g, a in zip(head_grads, head_inputs))
            for g, u in zip(flat_grads, patches):
                squared = squared + _conv_squared_norms(g, u) + g.sum(2).pow(2).sum(1)
            scale = self._clip_scale(squared)
            parts = []
            for conv, g, u in zip(model.convs, flat_grads, patches):
                weighted = g * scale[:, None, None]
                weight = torch.einsum("nop,nkp->ok", weighted, u).reshape(conv.weight.shape)
                parts += [weight.flatten(), weighted.sum((0, 2))]
            for g, a in zip(head_grads, head_inputs):
                parts += _linear_clipped_sum(g, a, scale)
            params = [p for layer in [*model.convs, *model.linears] for p in (layer.weight, layer.bias)]
            self._release(params, parts)
        return self._output(losses, trace.logits, y)

    @staticmethod
    def _output_grads(losses: torch.Tensor, outputs: list[torch.Tensor]) -> list[torch.Tensor]:
        """Per-example gradients of the loss at each layer's output (zeros for an empty batch)."""
        if losses.numel():
            return list(torch.autograd.grad(losses.sum(), outputs))
        return [torch.zeros_like(z) for z in outputs]

    def _clip_scale(self, squared_norms: torch.Tensor) -> torch.Tensor:
        """Per-example factor ``min(1, C / ||grad_i||)``."""
        return torch.clamp(self.context.config.clip_norm / squared_norms.sqrt().clamp_min(1e-12), max=1.0)

    def _release(self, params: list[torch.Tensor], parts: list[torch.Tensor]) -> None:
        """Release the clipped sum (``parts`` in ``params`` order), divided by the batch size
        (the expected batch ``q N`` for Poisson, ``m`` for fixed), into every ``.grad``."""
        released = self.release_update(torch.cat(parts)) / self.context.config.batch_size
        for param, part in zip(params, released.split([p.numel() for p in params])):
            param.grad = part.view_as(param).clone()

    def _output(self, losses: torch.Tensor, logits: torch.Tensor, y: torch.Tensor) -> StepOutput:
        correct = int((logits.argmax(1) == y).sum()) if y.numel() else 0
        return StepOutput(float(losses.detach().sum()), correct, int(y.shape[0]),
                          privacy_event=self.planned_event())


def _linear_squared_norms(g: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """``||g_i a_i^T||_F^2 + ||g_i||^2`` per example (weight and bias of a linear layer)."""
    return g.pow(2).sum(1) * (a.pow(2).sum(1) + 1)


def _linear_clipped_sum(g: torch.Tensor, a: torch.Tensor, scale: torch.Tensor) -> list[torch.Tensor]:
    """A linear layer's clipped weight and bias sums, ``(c * G)^T A`` and ``sum_i c_i g_i``, flat."""
    weighted = g * scale[:, None]
    return [(weighted.T @ a).flatten(), weighted.sum(0)]


def _conv_squared_norms(g: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """``||g_i U_i^T||_F^2`` per example, in chunks (``g``: (n, C_out, P), ``u``: (n, K, P))."""
    out = []
    for start in range(0, g.shape[0], PER_EXAMPLE_CHUNK):
        per_example = torch.bmm(g[start:start + PER_EXAMPLE_CHUNK], u[start:start + PER_EXAMPLE_CHUNK].transpose(1, 2))
        out.append(per_example.flatten(1).pow(2).sum(1))
    return torch.cat(out) if out else g.new_zeros(0)
