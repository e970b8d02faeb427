"""Bring your own model and data: DFA and private training on a user's ``nn.Module`` in the
user's own loop, in the style of Opacus (see :mod:`.dfa`)."""

from .calibration import calibrate, calibrated_device, plan
from .dfa import DFAHandle, attach_dfa, dfa_alignment
from .engine import PrivacyEngine
from .layers import UnsupportedModelError, linear_chain
from .optimizer import DPOptimizer, PrivacyBudgetExhausted
from .validator import ModuleValidator

__all__ = [
    "DFAHandle",
    "DPOptimizer",
    "ModuleValidator",
    "PrivacyBudgetExhausted",
    "PrivacyEngine",
    "UnsupportedModelError",
    "attach_dfa",
    "calibrate",
    "calibrated_device",
    "plan",
    "dfa_alignment",
    "linear_chain",
]
