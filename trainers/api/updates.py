"""The private updates of the wrapped optimizer: the clipped quantity each method releases, its
sensitivity and accounting event, computed from what hooks recorded during ``loss.backward()``.

- :class:`PerExampleClipping` (DP-SGD, Abadi et al. 2016): per-example gradients of every Linear,
  Conv1d/2d, GroupNorm, LayerNorm, InstanceNorm1d/2d and Embedding clipped to ``C`` by the rules of
  :mod:`.per_sample` (ghost norms or one batched product; closed forms for norms and embeddings);
  the clipped SUM (sensitivity ``C``) is released and divided by the expected batch ``q N``.
- :class:`DFAClipping` (DP-DFA, Lee & Kifer, Algorithm 1): the error clipped to ``tau_e``, each
  layer input to ``tau_h``, DFA signals through fixed feedback ``B`` of spectral norm ``beta``; the
  averaged update has the sensitivity of :mod:`trainers.methods.dfa_sensitivity` (same formula).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from opu_hal.privacy import Event, PoissonGaussianEvent

from ..core.clipping import clip_norm
from ..core.per_example import clip_scale
from ..core.sampling import step_generator
from ..methods.dfa_noise import step_event
from ..methods.dfa_sensitivity import DFASensitivity, spectral_feedback
from .cut_tap import error_and_scale
from .layers import LinearChain, UnsupportedModelError, linear_chain
from .per_sample import RULES, Rule, rule_for, trainable_params
from .tap import OutputTap, Record
from .validator import SUPPORTED, refusals

if TYPE_CHECKING:
    from opu_hal.privacy.digitized_lattice import DigitizedLattice
    from opu_hal.privacy.skellam import SkellamLattice

    Lattice = SkellamLattice | DigitizedLattice | None


class PerExampleClipping:
    """Records each clipped layer's input and output gradient; :meth:`clipped` forms the clipped sum
    from them by the layer's rule (:mod:`.per_sample`; the layers :mod:`.validator` accepts)."""

    neighboring = "add_remove"

    def __init__(
        self, model: nn.Module, max_grad_norm: float, loss_reduction: str, expected_batch: int, dataset_size: int
    ) -> None:
        refused = refusals(model)
        if refused:
            raise UnsupportedModelError("dp-sgd cannot clip this model: " + "; ".join(refused))
        self.layers = {name: m for name, m in model.named_modules() if rule_for(m) and trainable_params(m)}
        self.params = [p for m in self.layers.values() for p in trainable_params(m).values()]
        self.max_grad_norm = float(max_grad_norm)
        self.loss_reduction = loss_reduction
        self.expected_batch = expected_batch
        self.dataset_size = dataset_size
        self.sensitivity = self.max_grad_norm
        self.records: dict[str, list[torch.Tensor | None]] = {}
        self._handles = [model.register_forward_pre_hook(self._open)]
        self._handles += [m.register_forward_hook(self._hook(name)) for name, m in self.layers.items()]

    def _open(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        if torch.is_grad_enabled():  # an evaluation pass under no_grad keeps the training records
            self.records = {}

    def _hook(self, name: str) -> Callable[[nn.Module, tuple[Any, ...], torch.Tensor], None]:
        def hook(module: nn.Module, args: tuple[Any, ...], output: torch.Tensor) -> None:
            if not output.requires_grad:
                return
            if name in self.records:
                raise UnsupportedModelError(
                    f"layer {name!r} ran twice in one forward pass; per-example norms "
                    "of shared layers are not computed here"
                )
            entry: list[torch.Tensor | None] = [args[0].detach(), None]
            self.records[name] = entry
            output.register_hook(lambda g: entry.__setitem__(1, g.detach()))

        return hook

    def event(self, z: float, lattice: Lattice = None) -> Event:
        return PoissonGaussianEvent(self.expected_batch / self.dataset_size, z)

    def prepared(self) -> list[tuple[nn.Module, Rule, Any]]:
        """Each clipped layer, its rule, and what the rule prepared from the last backward pass."""
        out = []
        for name, layer in self.layers.items():
            a, g = self.records.get(name, [None, None])
            if a is None or g is None:
                raise UnsupportedModelError(
                    f"layer {name!r} has no recorded gradient: call loss.backward() "
                    "on the model's output before optimizer.step()"
                )
            rule = RULES[type(layer)]
            out.append((layer, rule, rule.prepare(layer, a, error_and_scale(g, self.loss_reduction)[0])))
        return out

    def squared_norms(self, prepared: list[tuple[nn.Module, Rule, Any]] | None = None) -> torch.Tensor:
        """``||grad_i||^2`` per example, over every trainable parameter of the clipped layers."""
        total: torch.Tensor | None = None
        for layer, rule, state in prepared if prepared is not None else self.prepared():
            names = trainable_params(layer)
            for name, norms in rule.squared_norms(layer, state).items():
                if name in names:
                    total = norms if total is None else total + norms
        if total is None:
            raise UnsupportedModelError(f"the model has no trainable layer to clip (dp-sgd clips {SUPPORTED})")
        return total

    def clipped(self) -> torch.Tensor:
        """The flattened clipped sum ``sum_i min(1, C / ||g_i||) g_i``, in :attr:`params` order."""
        if any(a is not None and a.shape[0] == 0 for a, _ in self.records.values()):  # an empty Poisson batch
            like = self.params[0]
            return torch.zeros(sum(p.numel() for p in self.params), dtype=like.dtype, device=like.device)
        prepared = self.prepared()
        scale = clip_scale(self.squared_norms(prepared), self.max_grad_norm)
        parts: list[torch.Tensor] = []
        for layer, rule, state in prepared:
            sums = rule.clipped_sums(layer, state, scale)
            parts += [sums[name].reshape(-1).to(p.dtype) for name, p in trainable_params(layer).items()]
        return torch.cat(parts)

    def released_to_grad(self, released: torch.Tensor) -> torch.Tensor:
        return released / self.expected_batch

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


class DFAClipping:
    """DP-DFA's clipped, averaged update of a user's chain (Algorithm 1, lines 6-16 before noise)."""

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
    ) -> None:
        self.chain: LinearChain = linear_chain(model, conv_prefix=True)
        if self.chain.prefix_params:
            name = next(n for n, m in self.chain.prefix if any(p.requires_grad for p in m.parameters()))
            raise UnsupportedModelError(
                f"layer {name!r} ({type(dict(self.chain.prefix)[name]).__name__}): make_private's dp-dfa trains "
                "an nn.Sequential's convolutions when its Linear layers are named: pass layers=[...] (paper 002 "
                "section 4's hybrid BP/DFA, per-example conv clipping to tau_c)"
            )
        self.tau_e, self.tau_h, self.beta = float(tau_e), float(tau_h), float(beta)
        self.loss_reduction = loss_reduction
        self.batch_size, self.dataset_size = batch_size, dataset_size
        generator = step_generator(feedback_seed, "feedback", 0)  # as trainers.methods.dp_dfa: public, seeded
        self.feedback = [spectral_feedback(w, self.chain.n_classes, beta, generator) for w in self.chain.hidden_widths]
        gamma = max((a.gamma_max for a in self.chain.activations), default=1.0)
        bounds = DFASensitivity(gamma, beta, tau_e, tau_h, batch_size, len(self.chain.hidden_widths))
        self.output_scale, self.sensitivity = bounds.output_scale, bounds.total  # the loop's formula
        self.pending: tuple[torch.Tensor, Record] | None = None
        self.tap = OutputTap(model, self.chain, self._record)
        self.params = self.tap.params

    def _record(self, grad: torch.Tensor, record: Record) -> tuple[None, list[None]]:
        self.pending = (grad.detach(), record)
        return None, [None] * len(self.tap.params)  # no un-noised gradient reaches .grad

    def event(self, z: float, lattice: Lattice = None) -> Event:
        return step_event(lattice, self.dataset_size, self.batch_size, z)

    def deltas(self, error: torch.Tensor, preacts: list[torch.Tensor]) -> list[torch.Tensor]:
        """``(B^{l+1} e) * phi'(z^l)`` per hidden layer and ``gamma beta e`` at the output, ``e`` clipped to ``tau_e``."""
        e = clip_norm(error, self.tau_e)
        hidden = [
            (e @ b.T.to(e)) * act.derivative(z) for b, act, z in zip(self.feedback, self.chain.activations, preacts)
        ]
        return [*hidden, self.output_scale * e]

    def clipped(self) -> torch.Tensor:
        """The flattened averaged update ``delta^T clip(h, tau_h) / m`` per layer (before noise)."""
        if self.pending is None:
            raise UnsupportedModelError(
                "no recorded error: call loss.backward() on the model's output before optimizer.step()"
            )
        grad, record = self.pending
        error, _ = error_and_scale(grad, self.loss_reduction)
        parts = []
        for layer, delta, h in zip(self.chain.linears, self.deltas(error, record.preacts), record.inputs):
            delta = delta / self.batch_size
            parts.append((delta.T @ clip_norm(h, self.tau_h)).flatten())
            if layer.bias is not None:
                parts.append(delta.sum(0))
        return torch.cat(parts)

    def released_to_grad(self, released: torch.Tensor) -> torch.Tensor:
        return released

    def remove(self) -> None:
        self.tap.remove()
