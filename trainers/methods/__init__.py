"""Training methods, one module each, named as in the papers (``shared/papers/README.md``).

Each method is registered once below (:func:`register_method`, :mod:`.registry`): the CLI's
``--method`` choices, config validation, the trainer, ``make_private``/``attach_dfa``, torchrun and
the audit all read the registry, so a method added with :func:`register_method` is offered
everywhere it fits.
"""

from __future__ import annotations

from . import dp_mac, dp_ulr, photonic_dp
from .base import GaussianNoiseMethod, Method, MethodContext, StepOutput
from .bp import Backprop
from .dfa import DFA
from .dp_dfa import DPDFA
from .dp_mac import DPMAC
from .dp_sgd import DPSGD
from .dp_ulr import DPULR
from .pdfa import PhotonicDFA
from .photonic_dp import PhotonicDP
from .registry import METHODS, SPECS, MethodSpec, get_method, get_spec, method_names, register_method, unregister_method
from .tdfa import TernarizedDFA

register_method(Backprop)
register_method(DFA, attach_profile="torch-cpu")
register_method(TernarizedDFA, attach_profile="torch-cpu")
register_method(PhotonicDFA, attach_profile="opu-sim")
register_method(PhotonicDP, noise_sources=("device",), distributed_refusal=photonic_dp.DISTRIBUTED_REFUSAL)
register_method(DPDFA, noise_sources=("software", "device"), user_update="dfa-clipping")
register_method(DPSGD, noise_sources=("software",), user_update="per-example-clipping")
register_method(
    DPULR, noise_sources=("software",), api_refusal=dp_ulr.API_REFUSAL, distributed_refusal=dp_ulr.DISTRIBUTED_REFUSAL
)
register_method(
    DPMAC, noise_sources=("software",), api_refusal=dp_mac.API_REFUSAL, distributed_refusal=dp_mac.DISTRIBUTED_REFUSAL
)

__all__ = [
    "GaussianNoiseMethod",
    "METHODS",
    "Method",
    "MethodContext",
    "MethodSpec",
    "SPECS",
    "StepOutput",
    "get_method",
    "get_spec",
    "method_names",
    "register_method",
    "unregister_method",
]
