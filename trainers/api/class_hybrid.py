"""Paper 002's hybrid BP/DFA (section 4, "Handling convolutional layers") in dp-dfa on a model written
as a class: the trainable layers outside the named ``nn.Linear`` layers (a conv block before the first
named layer, a norm between two) are trained by backpropagation of the DFA signal that enters their
block at the next cut (:mod:`.cut_tap`): before the first named layer, the gradient of
``sum_i <z_i^1, delta_i^1>`` as :class:`trainers.methods.dp_dfa.DPDFA` trains a CNN's convs.

Each such layer's per-example gradient (formed from its input and the signal at its output by the
rules of :mod:`.per_sample`) is clipped per example and layer to ``tau_c = gamma beta tau_e
sqrt(1 + tau_h^2)`` and averaged over the batch, so that it adds one term ``2 tau_c / m`` to the
sensitivity of :class:`trainers.methods.dfa_sensitivity.DFASensitivity` (``convs``), whatever the
signal's size. A layer type without a per-example rule, or BatchNorm, is refused by name. When the
output is the only named layer there is no DFA signal: the layers before it get backprop's own
per-example gradient of the loss (``loss_reduction``'s ``1 / m`` undone), clipped the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from ..core.per_example import clip_scale
from .cut_tap import error_and_scale
from .layers import UnsupportedModelError
from .per_sample import RULES, rule_for, trainable_params
from .validator import refusal


def backprop_layers(model: nn.Module, named: Sequence[tuple[str, nn.Module]]) -> dict[str, nn.Module]:
    """The modules with trainable parameters outside the ``named`` layers, by name; refuses BatchNorm
    (it mixes a batch's examples), running statistics and Embedding's in-place options (they learn
    from data outside the noised update: :func:`.validator.refusal`) and any trainable type without a
    per-example gradient rule."""
    owned = {id(p) for _, m in named for p in m.parameters()}
    found: dict[str, nn.Module] = {}
    for name, module in model.named_modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            raise UnsupportedModelError(
                f"layer {name!r} ({type(module).__name__}) mixes the examples of a batch, so one example's "
                "DFA signal would depend on the others: replace it by nn.GroupNorm or nn.LayerNorm"
            )
        reason = refusal(module)  # running statistics, Embedding's in-place options: learn outside the noise
        if reason is not None and rule_for(module) is not None:
            raise UnsupportedModelError(f"layer {name!r} ({type(module).__name__}): {reason}")
        own = [p for p in module.parameters(recurse=False) if p.requires_grad and id(p) not in owned]
        if not own:
            continue
        if rule_for(module) is None:
            allowed = ", ".join(t.__name__ for t in RULES)
            raise UnsupportedModelError(
                f"layer {name!r} ({type(module).__name__}) has trainable parameters outside the named layers "
                f"{[n for n, _ in named]}; dp-dfa trains such layers by backpropagation (paper 002's hybrid) "
                f"only for {allowed} (freeze it, or name it in layers=)"
            )
        found[name] = module
    return found


class BackpropRecords:
    """Records each backprop-trained layer's input and the signal at its output on the forward
    passes ``active()`` allows; :meth:`clipped` gives their clipped averaged updates."""

    def __init__(
        self,
        model: nn.Module,
        layers: dict[str, nn.Module],
        clip: float,
        active: Callable[[], bool],
        loss_reduction: str | None = None,
    ) -> None:
        """``loss_reduction``: the loss's, when the signal at these layers is the loss's own gradient
        (no cut after them); None when it is a DFA signal (per example, unscaled)."""
        self.layers, self.clip, self.active = layers, float(clip), active
        self.loss_reduction = loss_reduction
        self.params = [p for m in layers.values() for p in trainable_params(m).values()]
        self.records: dict[str, list[torch.Tensor | None]] = {}
        self._handles = [model.register_forward_pre_hook(self._open)]
        self._handles += [m.register_forward_hook(self._hook(name)) for name, m in layers.items()]

    def _open(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        if self.active():
            self.records = {}

    def _hook(self, name: str) -> Callable[[nn.Module, tuple[Any, ...], torch.Tensor], None]:
        def hook(module: nn.Module, args: tuple[Any, ...], output: torch.Tensor) -> None:
            if not (self.active() and output.requires_grad):
                return
            if name in self.records:
                raise UnsupportedModelError(f"layer {name!r} ran twice in one forward pass")
            entry: list[torch.Tensor | None] = [args[0].detach(), None]
            self.records[name] = entry
            output.register_hook(lambda g: entry.__setitem__(1, g.detach()))

        return hook

    def clipped(self, batch_size: int) -> list[torch.Tensor]:
        """Per layer and parameter, ``sum_i min(1, tau_c / ||grad_i||) grad_i / m`` flattened, in
        :attr:`params` order (``grad_i``: the layer's gradient of example ``i``'s DFA signal)."""
        parts: list[torch.Tensor] = []
        for name, layer in self.layers.items():
            a, g = self.records.get(name, [None, None])
            if a is None or g is None:
                raise UnsupportedModelError(
                    f"no feedback reached layer {name!r}: call loss.backward() on the model's output before "
                    "optimizer.step() (a layer after the last named layer gets no DFA signal)"
                )
            if self.loss_reduction is not None:
                g = error_and_scale(g, self.loss_reduction)[0]
            rule = RULES[type(layer)]
            state = rule.prepare(layer, a, g)
            names = trainable_params(layer)
            norms = [n for k, n in rule.squared_norms(layer, state).items() if k in names]
            scale = clip_scale(torch.stack(norms).sum(0), self.clip)
            sums = rule.clipped_sums(layer, state, scale)
            parts += [(sums[k].reshape(-1) / batch_size).to(p.dtype) for k, p in names.items()]
        return parts

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
