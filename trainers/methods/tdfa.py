"""Ternarized DFA: the error thresholded to {-1, 0, 1} at ``t`` (default 0.15), projected on a
torch device (paper 000, section 4, "TDFA")."""

from __future__ import annotations

from ..core.errors import TrainingConfigError
from .base import MethodContext
from .dfa import DFA


class TernarizedDFA(DFA):
    name = "tdfa"
    ternary = True

    def check_device(self, context: MethodContext) -> None:
        device = context.device
        if device is not None and not device.capabilities.accepts("ternary"):
            raise TrainingConfigError(
                f"method 'tdfa' projects the ternary error in one pass (a torch profile); "
                f"{device.profile.label!r} takes {device.capabilities.input_kind} input only "
                "(use 'pdfa' for binary-input optical devices)"
            )
