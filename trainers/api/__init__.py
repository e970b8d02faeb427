"""Bring your own model and data: DFA and private training on a user's ``nn.Module`` in the
user's own loop, in the style of Opacus (see :mod:`.dfa`)."""

from .dfa import DFAHandle, attach_dfa, dfa_alignment
from .layers import UnsupportedModelError, linear_chain

__all__ = ["DFAHandle", "UnsupportedModelError", "attach_dfa", "dfa_alignment", "linear_chain"]
