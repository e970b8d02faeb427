"""DFA on a model written as a class (any ``nn.Module`` with ``forward()``): feedback at named layers.

The model's graph is cut at the input of every named layer but the first: the last layer's block
(from its input to the model's output) gets backprop's own gradient, and the tensor that enters
layer ``l + 1`` receives the feedback signal ``B^l e`` instead of backprop's, which autograd carries
back through whatever lies between (activations, functional or modules, dropout, reshapes, a conv
block) into layer ``l``: for ``Linear -> phi -> Linear`` that is ``(B^l e) * phi'(z^l)``, paper 000
eq. 4, and for a block of convolutions it is paper 002's hybrid BP/DFA (section 4: backprop inside
a block, DFA at the block outputs). Everything before the first named layer gets backprop of the
first block's signal (the conv prefix of :mod:`.layers`).

DFA is undefined for a path from a block's inside to the output that bypasses the next cut (a
residual or skip connection across named layers): the first forward pass under autograd checks
that the output reaches no earlier block except through the cuts and names the layers it does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from .layers import UnsupportedModelError

#: ``signals(grad_at_output, record) -> one tensor per cut, shaped as that cut's input``.
Signals = Callable[[torch.Tensor, "CutRecord"], Sequence[torch.Tensor]]


def error_and_scale(grad: torch.Tensor, loss_reduction: str) -> tuple[torch.Tensor, float]:
    """Per-example error ``e`` and the factor the update carries: the loss's gradient at the
    output is ``e / m`` under ``"mean"`` (``e`` under ``"sum"``), as in Opacus's ``loss_reduction``."""
    if loss_reduction == "mean":
        m = max(grad.shape[0], 1)
        return grad * m, 1.0 / m
    if loss_reduction == "sum":
        return grad, 1.0
    raise UnsupportedModelError(f"loss_reduction must be 'mean' or 'sum', got {loss_reduction!r}")


def named_layers(model: nn.Module, layers: Sequence[str] | None) -> list[tuple[str, nn.Module]]:
    """The layers that take feedback, ``(name, module)`` in forward order: ``layers`` by name, or
    every ``nn.Linear`` in registration order (checked against the call order on the first pass)."""
    modules = dict(model.named_modules())
    if layers is None:
        found: list[tuple[str, nn.Module]] = [(n, m) for n, m in modules.items() if isinstance(m, nn.Linear)]
        if not found:
            raise UnsupportedModelError(
                f"{type(model).__name__} holds no nn.Linear layer; name its blocks with layers="
            )
        return found
    if isinstance(layers, str) or not layers:
        raise UnsupportedModelError(f"layers must be a non-empty list of submodule names, got {layers!r}")
    missing = [n for n in layers if n not in modules or n == ""]
    if missing:
        known = ", ".join(n for n in modules if n)
        raise UnsupportedModelError(
            f"layers={list(layers)}: no submodule {', '.join(map(repr, missing))} (it has {known})"
        )
    if len(set(layers)) != len(layers):
        raise UnsupportedModelError(f"layers={list(layers)} names a layer twice")
    return [(n, modules[n]) for n in layers]


@dataclass
class CutRecord:
    """One forward pass: each named layer's input and output, and the attached inputs of layers ``2..k``."""

    inputs: list[torch.Tensor | None]
    outputs: list[torch.Tensor | None]
    cuts: list[torch.Tensor | None] = field(default_factory=list)
    order: list[int] = field(default_factory=list)


class _Inject(torch.autograd.Function):
    """Identity on the output; backward hands the output's gradient on and gives each cut its signal."""

    @staticmethod
    def forward(ctx: Any, tap: CutTap, record: CutRecord, output: torch.Tensor, *cuts: torch.Tensor) -> torch.Tensor:
        ctx.tap, ctx.record = tap, record
        return output.view_as(output)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        signals = ctx.tap.signals(grad, ctx.record)
        return (None, None, grad, *signals)


class CutTap:
    """Hooks that cut ``model`` at the named layers and inject ``signals`` at the cuts on backward."""

    def __init__(self, model: nn.Module, layers: Sequence[tuple[str, nn.Module]], signals: Signals) -> None:
        self.model = model
        self.names = [n for n, _ in layers]
        self.modules = [m for _, m in layers]
        self.signals = signals
        self.enabled = True
        self.checked = False
        #: The record of the last forward pass under autograd (read by the private update).
        self.last: CutRecord | None = None
        self._current: CutRecord | None = None
        self._handles = [m.register_forward_pre_hook(self._cut(i)) for i, m in enumerate(self.modules)]
        self._handles += [m.register_forward_hook(self._record(i)) for i, m in enumerate(self.modules)]
        self._handles.append(model.register_forward_pre_hook(self._open))
        self._handles.append(model.register_forward_hook(self._close))

    def params_of(self, index: int) -> list[nn.Parameter]:
        return [p for p in self.modules[index].parameters() if p.requires_grad]

    def _open(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        n = len(self.modules)
        active = self.enabled and torch.is_grad_enabled()
        self._current = CutRecord([None] * n, [None] * n, [None] * (n - 1)) if active else None

    def _cut(self, index: int) -> Callable[[nn.Module, tuple[Any, ...]], tuple[Any, ...] | None]:
        def hook(module: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
            record = self._current
            if record is None:
                return None
            if record.inputs[index] is not None:
                raise UnsupportedModelError(f"layer {self.names[index]!r} ran twice in one forward pass")
            record.order.append(index)
            x = args[0]
            if not isinstance(x, torch.Tensor):
                raise UnsupportedModelError(
                    f"layer {self.names[index]!r} takes a {type(x).__name__}; a tensor is needed"
                )
            record.inputs[index] = x.detach()
            if index == 0:
                return None
            record.cuts[index - 1] = x
            return (x.detach(), *args[1:])

        return hook

    def _record(self, index: int) -> Callable[[nn.Module, tuple[Any, ...], torch.Tensor], None]:
        def hook(module: nn.Module, args: tuple[Any, ...], output: torch.Tensor) -> None:
            if self._current is not None:
                self._current.outputs[index] = output

        return hook

    def _close(self, module: nn.Module, args: tuple[Any, ...], output: torch.Tensor) -> torch.Tensor | None:
        record, self._current = self._current, None
        if record is None:
            return None
        if record.order != list(range(len(self.modules))):
            ran = [self.names[i] for i in record.order]
            raise UnsupportedModelError(
                f"the named layers ran as {ran}, not {self.names}: pass layers= in the order forward() calls them"
            )
        cuts = [c for c in record.cuts if c is not None]
        if not self.checked:
            self._check_paths(output, record)
            self.checked = True
        self.last = record
        out: torch.Tensor = _Inject.apply(self, record, output, *cuts)  # type: ignore[no-untyped-call]
        return out

    def _check_paths(self, output: torch.Tensor, record: CutRecord) -> None:
        """Refuse a path into block ``b``'s output (the next cut, or the model's output for the last
        block) from an earlier block that skips ``b``'s cut, naming the layers it skips."""
        sinks = [*record.cuts, output]
        for b in range(1, len(self.modules)):
            sink = sinks[b]
            earlier: list[tuple[str, torch.Tensor]] = [(self.names[j], p) for j in range(b) for p in self.params_of(j)]
            earlier += [(self.names[j], c) for j, c in enumerate(record.cuts[:b]) if c is not None and c.requires_grad]
            if sink is None or not sink.requires_grad or not earlier:
                continue
            reached = torch.autograd.grad(sink.sum(), [t for _, t in earlier], retain_graph=True, allow_unused=True)
            bypass = sorted({name for (name, _), g in zip(earlier, reached) if g is not None})
            if bypass:
                into = "the model's output" if b == len(self.modules) - 1 else f"the input of {self.names[b + 1]!r}"
                raise UnsupportedModelError(
                    f"{into} depends on layer(s) {', '.join(map(repr, bypass))} other than through {self.names[b]!r} "
                    "(a residual or skip path across a named layer): DFA's feedback is undefined there; name the "
                    "blocks so that each skip path stays inside one block (layers=[...])"
                )

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
