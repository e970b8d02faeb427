"""The accountant's PLD side: dp-accounting's privacy-loss distributions of a ledger's events.

Koskela et al. 2020 and Doroshenko et al. 2022 ("Connect the dots"): the composed PLD on a
discretized loss grid, pessimistic (the discretized PLD dominates the true one), so its epsilon is
a valid bound, tighter than RDP's for sampled Gaussian runs.
"""

from __future__ import annotations

import math

import dp_accounting
import numpy as np

from .events import _LIBRARY_RELATION, Event, Neighboring, PrivacyParameterError

PLD_FINEST_INTERVAL = 1e-4  # the PLD's default loss discretization
PLD_MAX_POINTS = 1_000_000  # grid points of the composed PLD: a few hundred MB at most, seconds
PLD_TAIL_MASS = 1e-15


def grid_interval(
    rdp: np.ndarray, orders: np.ndarray, finest: float = PLD_FINEST_INTERVAL, max_points: int = PLD_MAX_POINTS
) -> float:
    """The finest discretization interval (``>= finest``) whose PLD grid has at most ``max_points``
    points, so memory and time stay bounded (a coarser grid is still a pessimistic PLD).

    Up to tail mass ``tau = 1e-15``, the composed privacy loss lies in ``[-log(1/tau), U]``: below,
    ``P(L < -t) <= e^-t``; above, the Chernoff bound of the RDP curve ``rdp`` over ``orders``,
    ``U = min_alpha rdp(alpha) + log(1/tau) / (alpha - 1)``."""
    log_tail = math.log(1 / PLD_TAIL_MASS)
    upper = float(np.min(rdp + log_tail / (orders - 1)))
    if not math.isfinite(upper):
        raise PrivacyParameterError("the RDP curve is infinite at every order: there is no PLD to compute")
    return max(finest, (upper + log_tail) / max_points)


def check_pld_event(event: Event, neighboring: Neighboring) -> None:
    """Refuse an event dp-accounting's PLD does not cover (or one with a coupling cost)."""
    if not event.pld_supported or event.pld_event(neighboring) is None or event.total_variation() > 0:
        raise PrivacyParameterError(
            f"the PLD accountant does not cover {type(event).__name__}; account this run with RDP "
            "(conversion 'rdp', --accounting rdp)"
        )


def composed_pld(
    totals: dict[Event, int], neighboring: Neighboring, interval: float
) -> dp_accounting.pld.PLDAccountant:
    """dp-accounting's PLD accountant holding per-event ``totals`` on a loss grid of ``interval``."""
    composed = [
        dp_accounting.SelfComposedDpEvent(event.pld_event(neighboring), count)
        for event, count in totals.items()
        if count
    ]
    pld = dp_accounting.pld.PLDAccountant(_LIBRARY_RELATION[neighboring], value_discretization_interval=interval)
    pld.compose(dp_accounting.ComposedDpEvent(composed))
    return pld
