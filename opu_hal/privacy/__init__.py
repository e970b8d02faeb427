"""Privacy accounting: events, an RDP accountant, a budget, and the inverse (noise for a target).

Consumes numbers only (noise multipliers, sampling, steps), never a device.
"""

from .accountant import Accountant, LedgerEntry
from .budget import PrivacyBudget
from .events import (
    ComposedEvent,
    DEFAULT_ORDERS,
    Event,
    FixedSizeGaussianEvent,
    GaussianEvent,
    PhotonicDFAEvent,
    PoissonGaussianEvent,
    PrivacyParameterError,
    SampledWithRejectionGaussianEvent,
    event_from_dict,
)
from .inverse import noise_std_for, planned_epsilon, smallest_noise_multiplier

__all__ = [
    "Accountant",
    "ComposedEvent",
    "DEFAULT_ORDERS",
    "Event",
    "FixedSizeGaussianEvent",
    "GaussianEvent",
    "LedgerEntry",
    "PhotonicDFAEvent",
    "PoissonGaussianEvent",
    "PrivacyBudget",
    "PrivacyParameterError",
    "SampledWithRejectionGaussianEvent",
    "event_from_dict",
    "noise_std_for",
    "planned_epsilon",
    "smallest_noise_multiplier",
]
