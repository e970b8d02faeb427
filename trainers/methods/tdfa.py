"""Ternarized DFA: the error thresholded to {-1, 0, 1} at ``t`` (default 0.15), projected on a
torch device (paper 000, section 4, "TDFA")."""

from __future__ import annotations

from ..errors import TrainingConfigError
from .base import MethodContext
from .dfa import DFA


class TernarizedDFA(DFA):
    name = "tdfa"
    ternary = True

    def check_device(self, context: MethodContext) -> None:
        if context.device is not None and context.device.profile.backend != "torch":
            raise TrainingConfigError(
                f"method 'tdfa' projects on a torch profile; {context.device.profile.label!r} is "
                f"{context.device.profile.backend!r} (use 'pdfa' for optical devices)"
            )
