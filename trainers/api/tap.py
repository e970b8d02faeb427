"""Hooks that record a chain's layer inputs and pre-activations and hand the gradient at the
model's output to a callback that decides the parameters' gradients (DFA and DP-DFA)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .layers import LinearChain, UnsupportedModelError


@dataclass
class Record:
    """One forward pass: each Linear's input ``h^{l-1}`` and pre-activation ``z^l`` (detached)."""

    inputs: list[torch.Tensor]
    preacts: list[torch.Tensor]
    #: The first Linear's input still attached to the graph of a trainable prefix (else ``None``).
    attached: torch.Tensor | None = None


#: ``callback(grad_at_output, record) -> (gradient at the first Linear's input or None, one
#: gradient or None per parameter of the chain)``; the first flows back into the prefix.
Backward = Callable[[torch.Tensor, Record], tuple[torch.Tensor | None, Sequence[torch.Tensor | None]]]


class _AtOutput(torch.autograd.Function):
    """Identity on the output; its backward asks the tap for the parameters' gradients instead of
    letting autograd backpropagate through the model."""

    @staticmethod
    def forward(
        ctx: Any,
        tap: OutputTap,
        record: Record,
        output: torch.Tensor,
        attached: torch.Tensor | None,
        *params: torch.Tensor,
    ) -> torch.Tensor:
        ctx.tap, ctx.record = tap, record
        return output.view_as(output)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        input_grad, grads = ctx.tap.callback(grad, ctx.record)
        return (None, None, None, input_grad if ctx.record.attached is not None else None, *grads)


class OutputTap:
    """Forward hooks on every Linear of ``chain`` and on ``model``: the model's output is detached
    from its graph and re-attached to the chain's parameters through :class:`_AtOutput`, so
    ``loss.backward()`` calls ``callback`` once and writes what it returns into ``.grad``; the
    gradient it returns at the first Linear's input is backpropagated into a convolutional prefix."""

    def __init__(self, model: nn.Module, chain: LinearChain, callback: Backward) -> None:
        self.chain = chain
        self.callback = callback
        self.enabled = True
        self.params = [p for layer in chain.linears for p in (layer.weight, layer.bias) if p is not None]
        self._current: Record | None = None
        self._handles = [layer.register_forward_hook(self._record_layer(i)) for i, layer in enumerate(chain.linears)]
        self._handles.append(model.register_forward_pre_hook(self._open))
        self._handles.append(model.register_forward_hook(self._close))

    def _open(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        n = len(self.chain.linears)
        self._current = Record([None] * n, [None] * n)  # type: ignore[list-item]

    def _record_layer(self, index: int) -> Callable[[nn.Module, tuple[Any, ...], torch.Tensor], None]:
        def hook(layer: nn.Module, args: tuple[Any, ...], output: torch.Tensor) -> None:
            record = self._current
            if record is None or not self.enabled:
                return
            if record.inputs[index] is not None:
                raise UnsupportedModelError(f"layer {self.chain.names[index]!r} ran twice in one forward pass")
            if output.dim() != 2:
                raise UnsupportedModelError(
                    f"layer {self.chain.names[index]!r} got a {args[0].dim()}-d input; this API takes "
                    "(batch, features) inputs (flatten first)"
                )
            record.inputs[index] = args[0].detach()
            if index == 0 and args[0].requires_grad and self.chain.prefix_params:
                record.attached = args[0]
            record.preacts[index] = output.detach()

        return hook

    def _close(self, module: nn.Module, args: tuple[Any, ...], output: torch.Tensor) -> torch.Tensor | None:
        record, self._current = self._current, None
        if not self.enabled or record is None or not torch.is_grad_enabled():
            return None
        # torch leaves Function.apply unannotated
        out: torch.Tensor = _AtOutput.apply(  # type: ignore[no-untyped-call]
            self, record, output.detach(), record.attached, *self.params
        )
        return out

    def remove(self) -> None:
        """Remove every hook: the model trains by plain backpropagation again."""
        for handle in self._handles:
            handle.remove()
        self._handles = []
