"""Privacy events: one step of a mechanism, as an RDP curve over a grid of orders.

Standard Gaussian events are computed by Google's ``dp_accounting`` (their RDP is that library's; the
fixed-size one by its vectorised twin, :mod:`.fixed_size_gaussian`, tested against it); only the curves
no library offers are written here: the photonic DFA bound of Ohana et al.
(paper 000, Proposition 3) and the sampled-with-rejection Gaussian of DP-ULR (paper 004,
Theorem 3.5). Each event names the neighbouring relation its bound is stated for.
"""

from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar, Literal, TypeGuard, TypeVar

import dp_accounting
import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

from ..contract.errors import OpuHalError
from .fixed_size_gaussian import fixed_size_gaussian_rdp

Neighboring = Literal["add_remove", "replace_one"]
_LIBRARY_RELATION = {
    "add_remove": dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
    "replace_one": dp_accounting.NeighboringRelation.REPLACE_ONE,
}
DEFAULT_ORDERS: tuple[float, ...] = tuple(rdp_lib.DEFAULT_RDP_ORDERS)


class PrivacyParameterError(OpuHalError, ValueError):
    """An event's parameters are outside the range where its bound holds."""


MAX_NOISE_MULTIPLIER = 1e8  # beyond this every epsilon is 0 to double precision


def is_real(value: object) -> bool:
    """A real number (Python or numpy), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def is_count(value: object) -> TypeGuard[int | np.integer[Any]]:
    """A whole number (Python or numpy), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _positive(name: str, value: float, upper: float = math.inf) -> None:
    if not (is_real(value) and math.isfinite(value) and 0 < value <= upper):
        bound = f" and <= {upper:g}" if math.isfinite(upper) else ""
        raise PrivacyParameterError(f"{name} must be a finite number > 0{bound}, got {value!r}")


def _rate(name: str, value: float) -> None:
    if not (is_real(value) and 0 < value <= 1):
        raise PrivacyParameterError(f"{name} must be in (0, 1], got {value!r}")


@dataclass(frozen=True)
class Event(ABC):
    """Base class: an event knows its RDP curve, its relations and how to serialize."""

    kind: ClassVar[str] = ""
    relations: ClassVar[tuple[str, ...]] = ()
    pld_supported: ClassVar[bool] = False
    #: False for a published claim that is not a valid bound (kept for comparison, never for budgets).
    is_guarantee: ClassVar[bool] = True
    #: Whose claim a non-guarantee is (e.g. "paper 000, eq. 17"); empty for a guarantee.
    claim_source: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Every event's ``__post_init__`` first turns numpy scalars into the Python numbers they equal,
        so curves are computed in double precision and ledgers serialize (``np.float32`` inputs are
        ordinary inputs; arithmetic in float32 is not)."""
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("__post_init__")
        if own is not None and not getattr(own, "_plain_first", False):

            def __post_init__(self: Event, _own: Any = own) -> None:
                _plain_fields(self)
                _own(self)

            __post_init__._plain_first = True  # type: ignore[attr-defined]
            cls.__post_init__ = __post_init__  # type: ignore[method-assign]  # wraps the subclass's own

    def __post_init__(self) -> None:
        _plain_fields(self)

    @abstractmethod
    def rdp(self, orders: np.ndarray, neighboring: Neighboring) -> np.ndarray:
        """RDP epsilon of one occurrence at each order."""

    def total_variation(self) -> float:
        """Bound on the total variation between one occurrence as run and the mechanism whose RDP
        curve :meth:`rdp` gives (0: the curve is the mechanism's own). The accountant charges it in
        delta by the coupling lemma of :mod:`.pmf_rdp` (5)."""
        return 0.0

    def library_event(self) -> dp_accounting.DpEvent | None:
        """The equivalent ``dp_accounting`` event, or None when the library has none."""
        return None

    def pld_event(self, neighboring: Neighboring) -> dp_accounting.DpEvent | None:
        """The library event for its PLD accountant under ``neighboring``, in this module's convention
        (noise multiplier = std / L2 sensitivity under the accountant's relation)."""
        return self.library_event()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields; numpy scalars become the Python numbers they equal (the restored event
        is equal, hashes the same and gives the same curve)."""
        return {"kind": self.kind, **{k: _plain(v) for k, v in asdict(self).items()}}


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _plain_fields(event: Event) -> None:
    for field in fields(event):
        value = getattr(event, field.name)
        if isinstance(value, np.generic):
            object.__setattr__(event, field.name, value.item())


@dataclass(frozen=True)
class _LibraryEvent(Event):
    """An event whose RDP comes from dp_accounting's RdpAccountant."""

    def rdp(self, orders: np.ndarray, neighboring: Neighboring) -> np.ndarray:
        accountant = dp_accounting.rdp.RdpAccountant(list(orders), _LIBRARY_RELATION[neighboring])
        accountant.compose(self.library_event())
        return np.asarray(accountant.rdp, dtype=np.float64)  # public property: a copy


@dataclass(frozen=True)
class GaussianEvent(_LibraryEvent):
    """Gaussian mechanism, noise multiplier ``z = std / l2-sensitivity`` (Mironov 2017, Prop. 7:
    ``eps(alpha) = alpha / (2 z^2)``). Sensitivity is taken under the accountant's relation."""

    noise_multiplier: float
    kind: ClassVar[str] = "gaussian"
    relations: ClassVar[tuple[str, ...]] = ("add_remove", "replace_one")
    pld_supported: ClassVar[bool] = True

    def __post_init__(self) -> None:
        _positive("noise_multiplier", self.noise_multiplier, MAX_NOISE_MULTIPLIER)

    def library_event(self) -> dp_accounting.DpEvent:
        return dp_accounting.GaussianDpEvent(self.noise_multiplier)

    def pld_event(self, neighboring: Neighboring) -> dp_accounting.DpEvent:
        """dp-accounting's PLD takes a replace-one pair as two add/remove steps (sensitivity 2 per unit
        of the multiplier) while its RDP does not: in this module's convention the sensitivity is
        the relation's own, so under replace-one the library gets twice the multiplier."""
        factor = 2.0 if neighboring == "replace_one" else 1.0
        return dp_accounting.GaussianDpEvent(factor * self.noise_multiplier)


@dataclass(frozen=True)
class PoissonGaussianEvent(_LibraryEvent):
    """Poisson-subsampled Gaussian (each example kept with probability ``q``), add/remove-one
    adjacency, as DP-SGD uses (Mironov, Talwar, Zhang 2019, Sampled Gaussian Mechanism)."""

    sampling_rate: float
    noise_multiplier: float
    kind: ClassVar[str] = "poisson_gaussian"
    relations: ClassVar[tuple[str, ...]] = ("add_remove",)
    pld_supported: ClassVar[bool] = True

    def __post_init__(self) -> None:
        _rate("sampling_rate", self.sampling_rate)
        _positive("noise_multiplier", self.noise_multiplier, MAX_NOISE_MULTIPLIER)

    def library_event(self) -> dp_accounting.DpEvent:
        return dp_accounting.PoissonSampledDpEvent(
            self.sampling_rate, dp_accounting.GaussianDpEvent(self.noise_multiplier)
        )

    def rdp(self, orders: np.ndarray, neighboring: Neighboring) -> np.ndarray:
        """The library's curve at integer orders; at fractional orders (where its series overestimates,
        up to 26x) the exact value by quadrature, :func:`sampled_gaussian_rdp_quadrature`."""
        orders = np.asarray(orders, dtype=np.float64)
        fractional = orders != np.floor(orders)
        curve = np.empty_like(orders)
        if (~fractional).any():
            library = super().rdp(orders[~fractional], neighboring)
            # Rounding can make the library's value negative or NaN at extreme multipliers (q = 1e-6,
            # z = 1e8); there the unsampled Gaussian's alpha / (2 z^2), an upper bound, stands in.
            gaussian = orders[~fractional] / (2 * self.noise_multiplier**2)
            curve[~fractional] = np.where(library >= 0, library, gaussian)
        if fractional.any():
            curve[fractional] = sampled_gaussian_rdp_quadrature(
                self.sampling_rate, self.noise_multiplier, orders[fractional]
            )
        return curve


def sampled_gaussian_rdp_quadrature(q: float, sigma: float, orders: np.ndarray) -> np.ndarray:
    """RDP of the Poisson-subsampled Gaussian at any order > 1 (Mironov, Talwar, Zhang 2019, ``A_alpha``,
    the larger direction): ``log E_{z ~ N(0, s^2)}[(1 - q + q exp((2z - 1) / (2 s^2)))^alpha]
    / (alpha - 1)``, by the trapezoid rule in log space on ``[-30 s - 1, alpha + 30 s + 1]`` with
    steps of ``s / 40`` (the integrand is a Gaussian of width ``s`` around ``z <= alpha``: the rule is
    exponentially accurate there, and agrees with Opacus' series to 1e-7). Rounded up by 1e-6
    relative, so the figure is never below the exact one."""
    out = np.empty(len(orders))
    for i, alpha in enumerate(np.asarray(orders, dtype=np.float64)):
        low, high = -30 * sigma - 1, alpha + 30 * sigma + 1
        points = int(min(200_001, max(2001, (high - low) / (sigma / 40))))
        z = np.linspace(low, high, points)
        log_ratio = (2 * z - 1) / (2 * sigma**2)
        # alpha * log(1 - q + q r), computed without cancellation when q (r - 1) is small
        if q < 1:
            near = np.log1p(q * np.expm1(np.minimum(log_ratio, 1.0)))
            far = np.logaddexp(math.log1p(-q), math.log(q) + log_ratio)
            t = alpha * np.where(log_ratio < 1.0, near, far)
        else:
            t = alpha * log_ratio
        log_phi = -(z**2) / (2 * sigma**2) - 0.5 * math.log(2 * math.pi * sigma**2)
        step = z[1] - z[0]
        weights = np.full(points, step)
        weights[[0, -1]] /= 2
        if float(np.max(t)) < 700 and q < 1:
            # A - 1 = E[(1 - q + q r)^alpha - 1]: integrate the difference, so a tiny A - 1 keeps its digits.
            log_a = math.log1p(float(np.sum(weights * np.exp(log_phi) * np.expm1(t))))
        else:
            log_a = float(np.logaddexp.reduce(log_phi + t + np.log(weights)))
        if not math.isfinite(log_a):
            raise PrivacyParameterError(
                f"sampled Gaussian RDP quadrature failed at q={q}, sigma={sigma}, alpha={alpha}"
            )
        out[i] = max(0.0, log_a / (alpha - 1)) * (1 + 1e-6)
    return out


@dataclass(frozen=True)
class FixedSizeGaussianEvent(_LibraryEvent):
    """Gaussian on a minibatch of fixed size drawn without replacement, replace-one adjacency
    (Wang, Balle, Kasiviswanathan 2019), as DP-DFA uses (Lee and Kifer, paper 002, Lemma 3)."""

    dataset_size: int
    batch_size: int
    noise_multiplier: float
    kind: ClassVar[str] = "fixed_size_gaussian"
    relations: ClassVar[tuple[str, ...]] = ("replace_one",)

    def __post_init__(self) -> None:
        if not (
            is_count(self.dataset_size) and is_count(self.batch_size) and 1 <= self.batch_size <= self.dataset_size
        ):
            raise PrivacyParameterError(
                f"need integers 1 <= batch_size <= dataset_size, got batch_size={self.batch_size!r}, "
                f"dataset_size={self.dataset_size!r}"
            )
        _positive("noise_multiplier", self.noise_multiplier, MAX_NOISE_MULTIPLIER)

    def library_event(self) -> dp_accounting.DpEvent:
        return dp_accounting.SampledWithoutReplacementDpEvent(
            self.dataset_size, self.batch_size, dp_accounting.GaussianDpEvent(self.noise_multiplier)
        )

    def rdp(self, orders: np.ndarray, neighboring: Neighboring) -> np.ndarray:
        """The library's curve, computed by its vectorised twin :func:`.fixed_size_gaussian.fixed_size_gaussian_rdp`
        (equal to it within 1e-12 relative, never below)."""
        if neighboring != "replace_one":
            return super().rdp(orders, neighboring)  # the library's own refusal
        return fixed_size_gaussian_rdp(self.batch_size / self.dataset_size, self.noise_multiplier, orders)


@dataclass(frozen=True)
class ComposedEvent(Event):
    """Several mechanisms applied in one step (e.g. one per layer): RDP adds up (paper 000,
    Theorem 1). One ledger entry per step instead of one per part."""

    parts: tuple[Event, ...]
    kind: ClassVar[str] = "composed"

    def __post_init__(self) -> None:
        if not self.parts or not all(isinstance(p, Event) for p in self.parts):
            raise PrivacyParameterError("ComposedEvent needs one or more events")
        if not self.relations:
            stated = "; ".join(f"{type(p).__name__}: {' / '.join(p.relations) or 'none'}" for p in self.parts)
            raise PrivacyParameterError(
                f"ComposedEvent parts share no neighbouring relation, so no accountant can compose them ({stated})"
            )

    @property
    def is_guarantee(self) -> bool:  # type: ignore[override]
        return all(part.is_guarantee for part in self.parts)

    @property
    def claim_source(self) -> str:  # type: ignore[override]
        return "; ".join(sorted({part.claim_source for part in self.parts if not part.is_guarantee}))

    @property
    def relations(self) -> tuple[str, ...]:  # type: ignore[override]
        common = set(self.parts[0].relations)
        for part in self.parts[1:]:
            common &= set(part.relations)
        return tuple(sorted(common))

    def rdp(self, orders: np.ndarray, neighboring: Neighboring) -> np.ndarray:
        total: np.ndarray = np.sum([part.rdp(orders, neighboring) for part in self.parts], axis=0)
        return total

    def total_variation(self) -> float:
        return sum(part.total_variation() for part in self.parts)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "parts": [part.to_dict() for part in self.parts]}


EVENT_TYPES: dict[str, type[Event]] = {}
EventClass = TypeVar("EventClass", bound=type[Event])


def register_event(cls: EventClass) -> EventClass:
    """Make ``cls`` restorable from a ledger (:func:`event_from_dict`) under ``cls.kind``; usable as a
    class decorator. A new event module registers its classes at import, and ``opu_hal.privacy``
    imports every built-in event module, so any ledger it wrote restores. Refuses an empty kind and
    a kind already taken by another class."""
    if not (isinstance(cls, type) and issubclass(cls, Event) and cls.kind):
        raise PrivacyParameterError(f"register_event needs an Event subclass with a non-empty kind, got {cls!r}")
    taken = EVENT_TYPES.get(cls.kind)
    if taken is not None and taken is not cls:
        raise PrivacyParameterError(f"event kind {cls.kind!r} is already registered to {taken.__name__}")
    EVENT_TYPES[cls.kind] = cls
    return cls


for _cls in (GaussianEvent, PoissonGaussianEvent, FixedSizeGaussianEvent, ComposedEvent):
    register_event(_cls)


def event_from_dict(data: dict[str, Any]) -> Event:
    """Rebuild an event from :meth:`Event.to_dict` output."""
    fields = dict(data)
    kind = fields.pop("kind", None)
    if kind == ComposedEvent.kind:
        return ComposedEvent(tuple(event_from_dict(part) for part in fields.get("parts", [])))
    if kind not in EVENT_TYPES:
        raise PrivacyParameterError(f"unknown event kind {kind!r}; known: {sorted(EVENT_TYPES)}")
    try:
        return EVENT_TYPES[kind](**fields)
    except TypeError as exc:
        raise PrivacyParameterError(f"event {kind!r}: {exc}") from None
