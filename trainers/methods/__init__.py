"""Training methods, one module each, named as in the papers (``shared/papers/README.md``).

:data:`METHODS` is the one list of method names: the CLI's ``--method`` choices, config
validation and the trainer all read it, so a method added with :func:`register_method` is
trainable everywhere.
"""

from __future__ import annotations

from ..core.errors import TrainingConfigError
from .base import GaussianNoiseMethod, Method, MethodContext, StepOutput
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


def register_method(cls: type[Method], *, replace: bool = False) -> type[Method]:
    """Make ``cls`` trainable under ``cls.name`` (CLI, config, :func:`trainers.run.loop.train`);
    usable as a class decorator."""
    if not (isinstance(cls, type) and issubclass(cls, Method) and cls.name):
        raise TrainingConfigError(f"register_method needs a Method subclass with a name, got {cls!r}")
    if cls.name in METHODS and METHODS[cls.name] is not cls and not replace:
        raise TrainingConfigError(f"method {cls.name!r} is already registered; pass replace=True")
    METHODS[cls.name] = cls
    return cls


def unregister_method(name: str) -> None:
    """Remove a method added with :func:`register_method`."""
    METHODS.pop(name, None)


def method_names() -> tuple[str, ...]:
    return tuple(METHODS)


def get_method(name: str) -> type[Method]:
    """The method registered as ``name``; :class:`TrainingConfigError` lists the others."""
    if name not in METHODS:
        raise TrainingConfigError(f"--method {name!r}: choose one of {', '.join(METHODS)}")
    return METHODS[name]


__all__ = ["GaussianNoiseMethod", "METHODS", "Method", "MethodContext", "StepOutput", "get_method",
           "method_names", "register_method", "unregister_method"]
