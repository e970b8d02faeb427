"""The accountant: composes events over steps in RDP and converts to (epsilon, delta).

In the style of Opacus: ``accountant.step(event, count)``, ``get_epsilon(delta)``. RDP curves of
the standard events are dp_accounting's; conversion to (epsilon, delta) is dp_accounting's
``compute_epsilon`` / ``compute_delta`` (Canonne, Kamath, Steinke 2020, Prop. 12; the tightest
RDP conversion it offers). The ledger (events and counts) serializes to JSON and replays to the
same RDP vector, so a checkpoint restores exactly.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

from .events import (
    _LIBRARY_RELATION,
    DEFAULT_ORDERS,
    Event,
    Neighboring,
    PrivacyParameterError,
    event_from_dict,
    is_real,
)
from .ledger_checks import check_count, check_delta, check_orders
from .pld_conversion import PLD_FINEST_INTERVAL, PLD_MAX_POINTS, check_pld_event, composed_pld, grid_interval

LEDGER_VERSION = 1


@dataclass
class LedgerEntry:
    event: Event
    count: int


#: How the ledger is converted to (epsilon, delta): RDP alone, or also dp-accounting's PLD
#: (Koskela et al. 2020; Doroshenko et al. 2022, "Connect the dots"), taking the smaller epsilon.
CONVERSIONS = ("rdp", "pld")


class Accountant:
    """RDP accountant over a fixed grid of orders and one neighbouring relation.

    ``conversion="pld"`` also composes the ledger's privacy-loss distributions (every event must be
    one dp-accounting's PLD covers, and none may carry a coupling cost) and reports the smaller of
    the two epsilons, each a valid bound: about 7 % less noise for DP-SGD's shapes at epsilon 3."""

    def __init__(
        self, neighboring: Neighboring = "add_remove", orders: Sequence[float] = DEFAULT_ORDERS, conversion: str = "rdp"
    ):
        if neighboring not in _LIBRARY_RELATION:
            raise PrivacyParameterError(f"neighboring must be 'add_remove' or 'replace_one', got {neighboring!r}")
        if conversion not in CONVERSIONS:
            raise PrivacyParameterError(f"conversion must be 'rdp' or 'pld', got {conversion!r}")
        self.conversion = conversion
        self.neighboring: Neighboring = neighboring
        self.orders = check_orders(orders)
        self._rdp: np.ndarray = np.zeros_like(self.orders)
        self._ledger: list[LedgerEntry] = []
        self._curves: dict[Event, np.ndarray] = {}
        self._totals: dict[Event, int] = {}  # occurrences per event, in order of first use
        # fits(): per (event, delta, target), the ledger's shape and the largest total of the event that fits
        self._room: dict[
            tuple[Event, float, float, bool], tuple[tuple[tuple[Event, int | None], ...] | None, int | None]
        ] = {}

    # -- composing ---------------------------------------------------------------------------
    def curve(self, event: Event) -> np.ndarray:
        """RDP of one occurrence of ``event`` on this accountant's grid (memoized)."""
        if event not in self._curves:
            if self.neighboring not in event.relations:
                stated = " / ".join(event.relations) or "no common"
                raise PrivacyParameterError(
                    f"{type(event).__name__} is stated for {stated} adjacency; "
                    f"this accountant uses {self.neighboring!r}"
                )
            if self.conversion == "pld":
                check_pld_event(event, self.neighboring)
            curve = np.asarray(event.rdp(self.orders, self.neighboring), dtype=np.float64)
            if curve.shape != self.orders.shape or np.isnan(curve).any() or (curve < 0).any():
                raise PrivacyParameterError(f"{type(event).__name__} gave an invalid RDP curve (NaN or negative)")
            self._curves[event] = curve
        return self._curves[event]

    def step(self, event: Event, count: int = 1) -> None:
        """Record ``count`` occurrences of ``event``."""
        count = check_count(count)
        self.curve(event)  # refuses an event this accountant cannot state, even for count 0
        if count == 0:
            return
        if self._ledger and self._ledger[-1].event == event:
            self._ledger[-1].count += count
        else:
            self._ledger.append(LedgerEntry(event, count))
        self._totals[event] = self._totals.get(event, 0) + count
        self._rdp = self._compose(self._totals)

    def _compose(self, totals: dict[Event, int]) -> np.ndarray:
        """RDP of per-event totals: a function of the ledger alone, so a restore is bit-identical."""
        rdp = np.zeros_like(self.orders)
        for event, count in totals.items():
            if count:  # 0 * inf would be NaN
                rdp = rdp + count * self._curves[event]
        if np.isnan(rdp).any():
            raise PrivacyParameterError("the composed RDP curve holds NaN")
        return rdp

    @property
    def rdp(self) -> np.ndarray:
        rdp: np.ndarray = self._rdp.copy()
        return rdp

    @property
    def steps(self) -> int:
        return sum(entry.count for entry in self._ledger)

    @property
    def ledger(self) -> list[LedgerEntry]:
        return [LedgerEntry(e.event, e.count) for e in self._ledger]

    # -- reading -----------------------------------------------------------------------------
    def get_epsilon(self, delta: float) -> float:
        """Smallest epsilon over the orders for which the composition is (epsilon, delta)-DP."""
        return self.get_epsilon_and_order(delta)[0]

    def get_epsilon_and_order(self, delta: float) -> tuple[float, float]:
        """Epsilon and the RDP order that gives it (``nan`` when the PLD's epsilon is the smaller)."""
        self._refuse_claims()
        return self._converted(self._totals, self._rdp, delta)

    def _converted(self, totals: dict[Event, int], rdp: np.ndarray, delta: float) -> tuple[float, float]:
        """(epsilon, order) of per-event ``totals`` (whose composed RDP curve is ``rdp``) under this
        accountant's conversion."""
        epsilon, order = self._epsilon_and_order(rdp, delta, self._coupling(totals))
        if self.conversion == "pld" and totals:
            interval = grid_interval(rdp, self.orders)
            try:
                by_pld = self._pld_epsilon(totals, delta, interval)
            except OverflowError:  # dp-accounting takes exp(interval), beyond float64 here: RDP's epsilon stands
                by_pld = math.inf
            if by_pld < epsilon:
                return by_pld, math.nan
        return epsilon, order

    @staticmethod
    def _coupling(totals: dict[Event, int]) -> float:
        """Total variation ``eta`` between the run and the mechanisms the curves describe (pmf_rdp (5))."""
        return sum(count * event.total_variation() for event, count in totals.items())

    def _epsilon_and_order(self, rdp: np.ndarray, delta: float, coupling: float = 0.0) -> tuple[float, float]:
        """With a coupling cost ``eta`` (pmf_rdp (5)): the curves' epsilon at ``delta' = delta - (1 + e^eps)
        eta`` for an ``eps`` at least the result (fixed point from above), so ``delta' + (1 + e^eps) eta <= delta``."""
        check_delta(delta)
        epsilon, order = rdp_lib.compute_epsilon(self.orders, rdp, delta)
        assumed = epsilon
        for _ in range(50):
            if coupling == 0 or math.isnan(epsilon):
                break
            remaining = delta - (1 + math.exp(min(assumed, 700.0))) * coupling
            if not remaining > 0:
                return math.inf, math.nan
            epsilon, order = rdp_lib.compute_epsilon(self.orders, rdp, remaining)
            if epsilon <= assumed:
                break
            assumed = epsilon * (1 + 1e-9) + 1e-12
        else:
            return math.inf, math.nan
        if math.isnan(epsilon):
            raise PrivacyParameterError("epsilon came out NaN")
        return float(epsilon), float(order)

    def claims(self) -> tuple[str, ...]:
        """Whose published claims the ledger holds (events that are not guarantees); empty for a guarantee."""
        return tuple(
            sorted({e.event.claim_source or type(e.event).__name__ for e in self._ledger if not e.event.is_guarantee})
        )

    def _refuse_claims(self, extra: Event | None = None) -> None:
        events = [e.event for e in self._ledger] + ([extra] if extra is not None else [])
        claims = sorted({type(e).__name__ for e in events if not e.is_guarantee})
        if claims:
            raise PrivacyParameterError(
                f"the ledger holds {', '.join(claims)}: a published claim, not a valid bound; no epsilon "
                "guarantee can be given (Accountant.paper_claim_epsilon reports the claim)"
            )

    def paper_claim_epsilon(self, delta: float) -> float:
        """Epsilon the ledger's events CLAIM, published bounds included that are not valid (e.g. paper
        000's eq. 17). For comparison with a paper only; never a guarantee."""
        return self._epsilon_and_order(self._rdp, delta, self._coupling(self._totals))[0]

    def get_delta(self, epsilon: float) -> float:
        if not (is_real(epsilon) and epsilon >= 0):
            raise PrivacyParameterError(f"epsilon must be >= 0, got {epsilon}")
        self._refuse_claims()
        coupling = self._coupling(self._totals)
        delta = float(rdp_lib.compute_delta(self.orders, self._rdp, epsilon)[0])
        if self.conversion == "pld" and self._totals:
            pld = composed_pld(self._totals, self.neighboring, self.pld_interval())
            delta = min(delta, float(pld.get_delta(epsilon)))
        return min(1.0, delta + (1 + math.exp(min(epsilon, 700.0))) * coupling)

    def epsilon_after(self, event: Event, count: int, delta: float, *, claimed: bool = False) -> float:
        """Epsilon the composition would have after ``count`` more ``event``; changes nothing.
        ``claimed=True`` admits claims (the claimed epsilon, to plan or stop a run that reports one)."""
        count = check_count(count)
        if not claimed:
            self._refuse_claims(event)
        self.curve(event)
        totals = dict(self._totals)
        totals[event] = totals.get(event, 0) + count
        rdp = self._compose(totals)
        if claimed:
            return self._epsilon_and_order(rdp, delta, self._coupling(totals))[0]
        return self._converted(totals, rdp, delta)[0]

    def fits(self, event: Event, count: int, delta: float, target_epsilon: float, *, claimed: bool = False) -> bool:
        """``epsilon_after(event, count, delta, claimed=claimed) <= target_epsilon``, the same answer,
        asked before every step of a run with a budget: charges nothing.

        Where no event has a coupling cost (pmf_rdp (5)), epsilon is non-decreasing in the count of
        any event, in floating point too (``count * curve`` and the sums round monotonically, and so
        does each order's conversion, Canonne et al. Prop. 12, and their minimum). So when a
        question finds the ledger as the previous one left it but for more ``event``, the largest
        total of ``event`` that fits is found once by bisection on :meth:`epsilon_after` and every
        later question is a comparison of counts, until another event is charged."""
        count = check_count(count)
        if event.total_variation() > 0 or self._coupling(self._totals) > 0:
            return self.epsilon_after(event, count, delta, claimed=claimed) <= target_epsilon
        key = (event, delta, target_epsilon, claimed)
        shape = tuple((e, None if e == event else c) for e, c in self._totals.items())  # order matters
        base = self._totals.get(event, 0)
        seen, room = self._room.get(key, (None, None))
        if seen != shape:  # the first question, or another event was charged since: answer exactly
            self._room[key] = (shape, None)
            return self.epsilon_after(event, count, delta, claimed=claimed) <= target_epsilon
        if room is None:  # the ledger grew by this event alone since the last question: settle it
            room = base + self._largest_fitting(event, delta, target_epsilon, claimed)
            self._room[key] = (shape, room)
        if not claimed:
            self._refuse_claims(event)
        return base + count <= room

    def _largest_fitting(self, event: Event, delta: float, target_epsilon: float, claimed: bool) -> int:
        """The largest ``k`` with ``epsilon_after(event, k) <= target_epsilon`` (-1 if none; ``2^62``
        stands for no limit), by doubling then bisection."""

        def fits(k: int) -> bool:
            return self.epsilon_after(event, k, delta, claimed=claimed) <= target_epsilon

        if not fits(0):
            return -1
        low, high = 0, 1
        while fits(high):
            if high >= 1 << 62:
                return high
            low, high = high, high * 2
        while high - low > 1:  # fits(low), not fits(high)
            middle = (low + high) // 2
            low, high = (middle, high) if fits(middle) else (low, middle)
        return low

    def pld_interval(self, finest: float = PLD_FINEST_INTERVAL, max_points: int = PLD_MAX_POINTS) -> float:
        """The finest PLD loss grid (``>= finest``) of at most ``max_points`` points for this ledger
        (:func:`~opu_hal.privacy.pld_conversion.grid_interval`)."""
        return grid_interval(self._rdp, self.orders, finest, max_points)

    def get_epsilon_pld(
        self, delta: float, value_discretization_interval: float | None = None, max_points: int = PLD_MAX_POINTS
    ) -> float:
        """Epsilon from dp_accounting's PLD accountant (tighter), when every event is standard.

        The interval defaults to :meth:`pld_interval` (1e-4 unless the grid would exceed
        ``max_points``); an explicit interval whose grid would exceed ``max_points`` is refused."""
        check_delta(delta)
        for entry in self._ledger:
            check_pld_event(entry.event, self.neighboring)
        needed = self.pld_interval(max_points=max_points)
        if value_discretization_interval is None:
            value_discretization_interval = needed
        elif not (is_real(value_discretization_interval) and value_discretization_interval >= needed):
            raise PrivacyParameterError(
                f"value_discretization_interval {value_discretization_interval!r} would need more than "
                f"{max_points} grid points for this ledger; use >= {needed:.3g} (or raise max_points)"
            )
        try:
            return self._pld_epsilon(self._totals, delta, float(value_discretization_interval))
        except OverflowError:  # dp-accounting takes exp(interval): a grid this coarse overflows float64
            raise PrivacyParameterError(
                f"the PLD of this ledger cannot be computed: its losses need a grid interval of "
                f"{value_discretization_interval:.3g}, whose exponential overflows float64 (a run with almost "
                "no noise); its RDP epsilon is the bound"
            ) from None

    def _pld_epsilon(self, totals: dict[Event, int], delta: float, interval: float) -> float:
        return float(composed_pld(totals, self.neighboring, interval).get_epsilon(delta))

    # -- ledger ------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "version": LEDGER_VERSION,
            "neighboring": self.neighboring,
            "orders": self.orders.tolist(),
            **({"conversion": self.conversion} if self.conversion != "rdp" else {}),
            "entries": [{"event": e.event.to_dict(), "count": e.count} for e in self._ledger],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Accountant:
        if data.get("version") != LEDGER_VERSION:
            raise PrivacyParameterError(f"unknown ledger version {data.get('version')!r}")
        accountant = cls(data["neighboring"], data["orders"], data.get("conversion", "rdp"))
        for entry in data["entries"]:
            accountant.step(event_from_dict(entry["event"]), check_count(entry["count"]))
        return accountant

    @classmethod
    def from_json(cls, text: str) -> Accountant:
        return cls.from_dict(json.loads(text))

    def state_dict(self) -> dict[str, Any]:
        """The ledger as data (torch's and Opacus's save/restore convention); see :meth:`load_state_dict`."""
        return self.to_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replace this accountant's ledger by a saved one (curves recomputed from the events)."""
        self.__dict__.update(Accountant.from_dict(state).__dict__)

    def copy(self) -> Accountant:
        return Accountant.from_dict(self.to_dict())
