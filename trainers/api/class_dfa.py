"""``attach_dfa`` on a model written as a class, or with its feedback layers named (:mod:`.cut_tap`).

The feedback ``B e`` is projected by an opu_hal device (:class:`trainers.core.feedback.DeviceFeedback`,
one projection cut into one slice per cut) and reshaped to the input of each named layer after the
first; its matrices are sized on the first backward pass, when the cuts' widths are known.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn

from opu_hal import Device, NoiseReport

from ..core.feedback import DeviceFeedback
from .cut_tap import CutRecord, CutTap, error_and_scale, named_layers

if TYPE_CHECKING:
    from ..methods.dfa import DFA


class NamedLayersDFA:
    """DFA with feedback at named layers of any module (``attach_dfa(model, layers=...)``)."""

    def __init__(
        self,
        model: nn.Module,
        method: str,
        device: Device[Any],
        threshold: float,
        loss_reduction: str,
        layers: Sequence[str] | None,
        trainer: type[DFA],
    ) -> None:
        self.model, self.method, self.device = model, method, device
        self.ternary, self.threshold = trainer.ternary, threshold
        self.loss_reduction = loss_reduction
        trainer.check_device(None, SimpleNamespace(device=device))  # type: ignore[arg-type]  # self unused
        self.feedback: DeviceFeedback | None = None
        #: The device's noise report of the last feedback projection.
        self.last_noise: NoiseReport | None = None
        self.tap = CutTap(model, named_layers(model, layers), self._signals)

    @property
    def layer_names(self) -> list[str]:
        return list(self.tap.names)

    def _signals(self, grad: torch.Tensor, record: CutRecord) -> list[torch.Tensor]:
        with torch.no_grad():
            cuts = cast("list[torch.Tensor]", record.cuts)
            e, scale = error_and_scale(grad.flatten(1), self.loss_reduction)
            if self.feedback is None:
                widths = [c[0].numel() for c in cuts]
                self.feedback = DeviceFeedback(
                    self.device, e.shape[1], widths, ternary=self.ternary, threshold=self.threshold
                )
            if not cuts:
                return []
            projection = self.feedback.project(e)
            self.last_noise = projection.noise
            return [(s * scale).reshape(c.shape).to(c.dtype) for s, c in zip(projection.slices, cuts)]

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
