"""Photonic DFA: the ternarized error projected on a binary-input optical device in two passes,
``B e = B e+ - B e-`` (paper 000, section 4, "PDFA"; :func:`opu_hal.project_ternary`)."""

from __future__ import annotations

from ..core.errors import TrainingConfigError
from .base import MethodContext
from .dfa import DFA


class PhotonicDFA(DFA):
    name = "pdfa"
    ternary = True
    default_profile = "opu-sim"

    def check_device(self, context: MethodContext) -> None:
        device = context.device
        if device is not None and device.capabilities.input_kind != "binary":
            raise TrainingConfigError(
                f"method 'pdfa' runs on a binary-input optical device (simulated or lighton); "
                f"{device.profile.label!r} takes {device.capabilities.input_kind} input (use 'tdfa')"
            )
