"""Privacy accounting: events, an RDP accountant, a budget, and the inverse (noise for a target).

Consumes numbers only (noise multipliers, sampling, steps), never a device.
"""

from .accountant import Accountant, LedgerEntry
from .budget import PrivacyBudget
from .digitized_events import DigitizedNoiseEvent, FixedSizeDigitizedNoiseEvent, PoissonDigitizedNoiseEvent
from .events import (
    DEFAULT_ORDERS,
    EVENT_TYPES,
    ComposedEvent,
    Event,
    FixedSizeGaussianEvent,
    GaussianEvent,
    PoissonGaussianEvent,
    PrivacyParameterError,
    event_from_dict,
    register_event,
)
from .inverse import noise_std_for, planned_epsilon, smallest_noise_multiplier
from .paper_events import (
    PHOTONIC_DP_UNBOUNDED_REASON,
    ControllerClaimEvent,
    PhotonicDFAEvent,
    SampledWithRejectionGaussianEvent,
    UnboundedEvent,
)
from .rounding import FixedSizeRoundedSkellamEvent, PoissonRoundedSkellamEvent, RoundedSkellamEvent

# Every built-in event module is imported here so that its events register (``register_event``) and
# any ledger this package wrote restores, whichever modules the restoring process imported.
from .skellam import FixedSizeSkellamEvent, PoissonSkellamEvent, SkellamEvent

__all__ = [
    "Accountant",
    "ComposedEvent",
    "ControllerClaimEvent",
    "DEFAULT_ORDERS",
    "EVENT_TYPES",
    "DigitizedNoiseEvent",
    "FixedSizeDigitizedNoiseEvent",
    "Event",
    "FixedSizeGaussianEvent",
    "FixedSizeSkellamEvent",
    "FixedSizeRoundedSkellamEvent",
    "PoissonDigitizedNoiseEvent",
    "PoissonRoundedSkellamEvent",
    "PoissonSkellamEvent",
    "RoundedSkellamEvent",
    "GaussianEvent",
    "LedgerEntry",
    "PHOTONIC_DP_UNBOUNDED_REASON",
    "PhotonicDFAEvent",
    "PoissonGaussianEvent",
    "PrivacyBudget",
    "PrivacyParameterError",
    "SampledWithRejectionGaussianEvent",
    "SkellamEvent",
    "UnboundedEvent",
    "event_from_dict",
    "noise_std_for",
    "planned_epsilon",
    "register_event",
    "smallest_noise_multiplier",
]
