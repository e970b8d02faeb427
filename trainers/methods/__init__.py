"""Training methods, one module each, named as in the papers (``shared/papers/README.md``)."""

from __future__ import annotations

from .base import Method, MethodContext, StepOutput
from .bp import Backprop
from .dp_dfa import DPDFA
from .dp_sgd import DPSGD
from .dp_mac import DPMAC
from .dp_ulr import DPULR
from .dfa import DFA
from .pdfa import PhotonicDFA
from .photonic_dp import PhotonicDP
from .tdfa import TernarizedDFA

METHODS: dict[str, type[Method]] = {
    cls.name: cls for cls in (Backprop, DFA, TernarizedDFA, PhotonicDFA, PhotonicDP, DPDFA, DPSGD, DPULR, DPMAC)
}


def register_method(cls: type[Method]) -> type[Method]:
    METHODS[cls.name] = cls
    return cls


__all__ = ["METHODS", "Method", "MethodContext", "StepOutput", "register_method"]
