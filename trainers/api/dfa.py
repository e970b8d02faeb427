"""DFA on a user's own ``nn.Sequential``, in the user's own loop (Nokland 2016; paper 000's
TDFA and photonic PDFA):

>>> import torch, torch.nn.functional as F
>>> from torch import nn
>>> from trainers.api import attach_dfa
>>> model = nn.Sequential(nn.Linear(20, 64), nn.Tanh(), nn.Linear(64, 10))
>>> dfa = attach_dfa(model, method="dfa", device="torch-cpu")
>>> optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
>>> x, y = torch.randn(32, 20), torch.randint(0, 10, (32,))
>>> optimizer.zero_grad(); F.cross_entropy(model(x), y).backward(); optimizer.step()

After ``loss.backward()`` each Linear's ``.grad`` holds the DFA update: the output layer gets its
true gradient ``e h^T``, and hidden layer ``l`` gets ``delta^l h^{l-1 T}`` with
``delta^l = (B^{l+1} e) * phi'(z^l)`` (paper 000, eq. 4), ``B e`` projected by an opu_hal device
(:class:`trainers.core.feedback.DeviceFeedback`, the projection the built-in methods use). The error
``e`` is the gradient of the loss at the output per example (``softmax - onehot`` for
cross-entropy), so any loss works.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from opu_hal import Device, NoiseReport, load_device

from ..core.feedback import DeviceFeedback
from ..methods import SPECS, MethodSpec
from ..methods.dfa import DFA
from .class_dfa import NamedLayersDFA
from .cut_tap import error_and_scale
from .layers import LinearChain, UnsupportedModelError, linear_chain
from .placement import resolve_opu
from .tap import OutputTap, Record
from .validation import check_attach, check_module


def attachable() -> dict[str, MethodSpec]:
    """The registered methods ``attach_dfa`` offers (``MethodSpec.attach_profile`` set)."""
    return {name: spec for name, spec in SPECS.items() if spec.attach_profile is not None}


def attached_spec(method: str) -> MethodSpec:
    """The registration of ``method`` if ``attach_dfa`` offers it; else an error listing those it does."""
    offered = attachable()
    if method not in offered:
        raise UnsupportedModelError(f"method {method!r}: choose one of {', '.join(offered)}")
    return offered[method]


def open_device(device: Device[Any] | str | None, method: str) -> Device[Any]:
    """``device`` itself, the device a profile name or path describes, or the method's default."""
    if isinstance(device, Device):
        return device
    if device is not None:
        return load_device(device)
    profile = attached_spec(method).attach_profile
    assert profile is not None  # attachable() offers only methods with one
    return load_device(profile)


def chain_grads(deltas: list[torch.Tensor], inputs: list[torch.Tensor], chain: LinearChain) -> list[torch.Tensor]:
    """``dW = delta^T h``, ``db = sum delta`` per layer, in :attr:`OutputTap.params` order."""
    grads: list[torch.Tensor] = []
    for layer, delta, h in zip(chain.linears, deltas, inputs):
        grads.append(delta.T @ h)
        if layer.bias is not None:
            grads.append(delta.sum(0))
    return grads


class DFAHandle:
    """DFA attached to a model: :meth:`detach` restores backprop, :meth:`disabled` suspends DFA."""

    def __init__(
        self, model: nn.Module, method: str, device: Device[Any], threshold: float, loss_reduction: str
    ) -> None:
        trainer = cast("type[DFA]", attached_spec(method).trainer)  # attach_profile is for the DFA family
        self.model = model
        self.method = method
        self.chain = linear_chain(model, conv_prefix=True)
        self.device = device
        trainer.check_device(None, SimpleNamespace(device=device))  # type: ignore[arg-type]  # self unused
        self.feedback = DeviceFeedback(
            device, self.chain.n_classes, self.chain.hidden_widths, ternary=trainer.ternary, threshold=threshold
        )
        self.loss_reduction = loss_reduction
        #: The device's noise report of the last feedback projection.
        self.last_noise: NoiseReport | None = None
        self.tap = OutputTap(model, self.chain, self._backward)

    def _backward(self, grad: torch.Tensor, record: Record) -> tuple[torch.Tensor | None, list[torch.Tensor]]:
        """The chain's DFA updates, and ``delta^1 W^1`` at the first Linear's input: backprop of
        ``<z^1, delta^1>`` into a conv prefix (paper 002 section 4's hybrid; ``delta^1`` is the
        first layer's DFA signal, ``e`` itself when the head has no hidden layer)."""
        with torch.no_grad():
            e, scale = error_and_scale(grad, self.loss_reduction)
            projection = self.feedback.project(e)
            self.last_noise = projection.noise
            deltas = [
                b_e * act.derivative(z) * scale
                for b_e, act, z in zip(projection.slices, self.chain.activations, record.preacts)
            ]
            deltas.append(grad)
            first = self.chain.linears[0].weight
            input_grad = (deltas[0] @ first).to(record.attached) if record.attached is not None else None
            return input_grad, chain_grads(deltas, record.inputs, self.chain)

    @contextmanager
    def disabled(self) -> Iterator[None]:
        """Forward passes inside run plain backpropagation."""
        previous, self.tap.enabled = self.tap.enabled, False
        try:
            yield
        finally:
            self.tap.enabled = previous

    def detach(self) -> None:
        self.tap.remove()


def attach_dfa(
    model: nn.Module,
    method: str = "dfa",
    device: Device[Any] | str | None = None,
    *,
    opu: Device[Any] | str | None = None,
    layers: Sequence[str] | None = None,
    threshold: float = 0.15,
    loss_reduction: str = "mean",
) -> DFAHandle | NamedLayersDFA:
    """Make ``loss.backward()`` on ``model``'s output deliver DFA updates to its Linear layers.

    ``method``: ``"dfa"`` (real error, torch device), ``"tdfa"`` (error ternarized at
    ``threshold``, paper 000 section 4) or ``"pdfa"`` (ternarized error projected in two passes on a
    binary-input optical device, e.g. ``"opu-sim"``). ``device``: an opu_hal device or profile name;
    it must take ``>= classes`` inputs and give ``>= sum of hidden widths`` outputs. The model's
    input receives no gradient. A convolutional prefix (Conv1d/2d, pooling, element-wise
    activations, Flatten) before the first Linear makes paper 002's hybrid network (section 4, as
    :mod:`trainers.core.cnn` for dp-dfa): the convs get backprop's gradient of ``<z^1, delta^1>``,
    ``delta^1`` the first Linear's DFA signal. A model outside ``[prefix] Linear (phi Linear)*`` is
    refused with the offending layer's name (:class:`UnsupportedModelError`).

    A model written as a class, or any model given ``layers=["fc1", "fc2", "out"]`` (submodule
    names in forward order; default: every ``nn.Linear`` in registration order), takes its feedback
    at the inputs of the named layers (:mod:`.cut_tap`): functional activations and conv blocks
    between them are trained by backprop of the signal, residual paths across them are refused.
    ``opu``: the device (``device=`` is its deprecated old name); the torch device is the model's.
    """
    check_module(model, "model")
    opu = resolve_opu(opu, device, "attach_dfa")
    check_attach(method, threshold, loss_reduction, opu, list(attachable()))
    opened = open_device(opu, method)
    if layers is None and isinstance(model, nn.Sequential):
        return DFAHandle(model, method, opened, float(threshold), loss_reduction)
    trainer = cast("type[DFA]", attached_spec(method).trainer)
    return NamedLayersDFA(model, method, opened, float(threshold), loss_reduction, layers, trainer)


def dfa_alignment(
    handle: DFAHandle,
    x: torch.Tensor,
    y: torch.Tensor,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = F.cross_entropy,
) -> dict[str, float]:
    """Cosine, per Linear weight, between the DFA update and backprop's gradient on ``(x, y)``
    (paper 000, Figure 2; :mod:`trainers.run.alignment` for the built-in methods), and per weight of a
    conv prefix. Leaves ``.grad`` as it found it. The output layer's cosine is 1: DFA and BP give it the same update."""
    chain = handle.chain
    named = [(n, w) for n, m in chain.prefix if isinstance(w := getattr(m, "weight", None), torch.Tensor)]
    named += [(n, layer.weight) for n, layer in zip(chain.names, chain.linears)]
    params = [*chain.prefix_params, *handle.tap.params]
    saved = [p.grad for p in params]

    def grads() -> list[torch.Tensor]:
        for p in params:
            p.grad = None
        loss_fn(handle.model(x), y).backward()
        missing = [name for name, w in named if w.grad is None]
        if missing:
            raise UnsupportedModelError(f"no gradient reached {', '.join(missing)} (requires_grad off?)")
        return [w.grad.detach().clone() for _, w in named if w.grad is not None]

    ours = grads()
    with handle.disabled():
        reference = grads()
    for p, g in zip(params, saved):
        p.grad = g
    return {
        name: float(F.cosine_similarity(a.flatten(), b.flatten(), dim=0))
        for (name, _), a, b in zip(named, ours, reference)
    }
