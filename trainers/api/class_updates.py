"""DP-DFA's clipped update (Lee & Kifer, Algorithm 1) on a model written as a class: the feedback
``B^l clip(e)`` enters at the input of each named ``nn.Linear`` after the first (:mod:`.cut_tap`),
autograd carries it back through whatever ``forward()`` applies between (``torch.tanh``, ``F.relu``,
dropout...) to the layer's output, where a hook reads the per-example signal ``delta^l``.

The sensitivity of :class:`trainers.methods.dfa_sensitivity.DFASensitivity` assumes
``||delta^l_i|| <= gamma beta tau_e``, which holds when the map between layers acts per example with
derivative at most ``gamma``. That map is the user's code here, so the bound is enforced instead:
each ``delta^l_i`` is clipped to ``gamma beta tau_e`` with ``gamma = 1`` (a no-op for tanh, sigmoid,
ReLU, softplus), and the sensitivity holds for any per-example map. A map that mixes examples
(BatchNorm in training mode) would make ``delta^l_i`` depend on other examples: BatchNorm is refused.
Trainable layers outside the named ones (a conv block) train by paper 002's hybrid BP/DFA
(:mod:`.class_hybrid`), each clipped per example to ``tau_c`` and counted in the sensitivity.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from opu_hal.privacy import Event

from ..core.clipping import clip_norm
from ..core.sampling import step_generator
from ..methods.dfa_noise import step_event
from ..methods.dfa_sensitivity import DFASensitivity, spectral_feedback
from .class_hybrid import BackpropRecords, backprop_layers
from .cut_tap import CutRecord, CutTap, error_and_scale, named_layers
from .layers import UnsupportedModelError

if TYPE_CHECKING:
    from .updates import Lattice

#: The derivative bound the per-example signals are clipped to (see the module's docstring).
GAMMA = 1.0


def private_linears(model: nn.Module, layers: Sequence[str] | None) -> list[tuple[str, nn.Linear]]:
    """The named layers, all ``nn.Linear`` (the other trainable layers go to :mod:`.class_hybrid`)."""
    named = named_layers(model, layers)
    for name, module in named:
        if not isinstance(module, nn.Linear):
            raise UnsupportedModelError(
                f"layer {name!r} ({type(module).__name__}): make_private's dp-dfa takes its feedback at "
                "nn.Linear layers; name the Linear layers (a conv block before or between them trains by "
                "paper 002's hybrid BP/DFA)"
            )
    return [(n, m) for n, m in named if isinstance(m, nn.Linear)]


class NamedDFAClipping:
    """DP-DFA's clipped, averaged update of the named Linear layers of any module (before noise)."""

    neighboring = "replace_one"

    def __init__(
        self,
        model: nn.Module,
        tau_e: float,
        tau_h: float,
        beta: float,
        loss_reduction: str,
        batch_size: int,
        dataset_size: int,
        feedback_seed: int = 0,
        layers: Sequence[str] | None = None,
    ) -> None:
        named = private_linears(model, layers)
        self.names = [n for n, _ in named]
        self.linears = [m for _, m in named]
        self.tau_e, self.tau_h, self.beta = float(tau_e), float(tau_h), float(beta)
        self.loss_reduction = loss_reduction
        self.batch_size, self.dataset_size = batch_size, dataset_size
        hybrid = backprop_layers(model, named)
        n_classes = self.linears[-1].out_features
        generator = step_generator(feedback_seed, "feedback", 0)  # public, seeded, as the loop's
        self.feedback = [spectral_feedback(m.in_features, n_classes, beta, generator) for m in self.linears[1:]]
        bounds = DFASensitivity(GAMMA, beta, tau_e, tau_h, batch_size, len(self.linears) - 1, convs=len(hybrid))
        self.output_scale, self.sensitivity = bounds.output_scale, bounds.total
        self.signal_clip = GAMMA * self.beta * self.tau_e
        self.pending: tuple[torch.Tensor, CutRecord] | None = None
        self.signals: list[torch.Tensor | None] = [None] * len(self.linears)
        self._handles = [model.register_forward_hook(self._check_output)]
        self._handles += [m.register_forward_hook(self._watch(i)) for i, m in enumerate(self.linears[:-1])]
        self.tap = CutTap(model, named, self._signals)
        active = lambda: torch.is_grad_enabled() and self.tap.enabled  # noqa: E731
        loss_grad = loss_reduction if len(named) == 1 else None  # no cut: the loss's own gradient
        self.hybrid = BackpropRecords(model, hybrid, bounds.conv_clip, active, loss_grad)
        self.params: list[torch.Tensor] = [p for m in self.linears for p in (m.weight, m.bias) if p is not None]
        self.params += self.hybrid.params

    def _check_output(self, module: nn.Module, args: tuple[Any, ...], output: torch.Tensor) -> None:
        record = self.tap._current
        if record is not None and record.outputs[-1] is not output:
            raise UnsupportedModelError(
                f"forward() returns something other than the output of {self.names[-1]!r}, the last named "
                "layer: dp-dfa reads the error at that layer (put softmax and the like in the loss)"
            )

    def _watch(self, index: int) -> Callable[[nn.Module, tuple[Any, ...], torch.Tensor], None]:
        def hook(module: nn.Module, args: tuple[Any, ...], output: torch.Tensor) -> None:
            if torch.is_grad_enabled() and self.tap.enabled and output.requires_grad:
                output.register_hook(lambda g: self.signals.__setitem__(index, g.detach()))

        return hook

    def _signals(self, grad: torch.Tensor, record: CutRecord) -> list[torch.Tensor]:
        with torch.no_grad():
            error, _ = error_and_scale(grad.detach(), self.loss_reduction)
            e = clip_norm(error, self.tau_e)
            self.pending = (e, record)
            self.signals = [None] * len(self.linears)
            cuts = [c for c in record.cuts if c is not None]
            return [(e @ b.T.to(e)).reshape(c.shape).to(c.dtype) for b, c in zip(self.feedback, cuts)]

    def event(self, z: float, lattice: Lattice = None) -> Event:
        return step_event(lattice, self.dataset_size, self.batch_size, z)

    def clipped(self) -> torch.Tensor:
        """The flattened averaged update ``clip(delta)^T clip(h, tau_h) / m`` per layer (before noise)."""
        if self.pending is None:
            raise UnsupportedModelError(
                "no recorded error: call loss.backward() on the model's output before optimizer.step()"
            )
        e, record = self.pending
        missing = [n for n, s in zip(self.names[:-1], self.signals) if s is None]
        if missing:
            raise UnsupportedModelError(f"no feedback reached {', '.join(map(repr, missing))} (requires_grad off?)")
        deltas = [clip_norm(s, self.signal_clip) for s in self.signals[:-1] if s is not None]
        deltas.append(self.output_scale * e)
        parts = []
        for layer, delta, h in zip(self.linears, deltas, record.inputs):
            assert h is not None  # every named layer ran (the tap checks the call order)
            delta = delta / self.batch_size
            parts.append((delta.T @ clip_norm(h, self.tau_h)).flatten())
            if layer.bias is not None:
                parts.append(delta.sum(0))
        return torch.cat(parts + self.hybrid.clipped(self.batch_size))

    def released_to_grad(self, released: torch.Tensor) -> torch.Tensor:
        return released

    def remove(self) -> None:
        self.tap.remove()
        self.hybrid.remove()
        for handle in self._handles:
            handle.remove()
