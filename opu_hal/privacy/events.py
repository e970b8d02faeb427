"""Privacy events: one step of a mechanism, as an RDP curve over a grid of orders.

Standard Gaussian events are computed by Google's ``dp_accounting`` (their RDP is that library's);
only the curves no library offers are written here: the photonic DFA bound of Ohana et al.
(paper 000, Proposition 3) and the sampled-with-rejection Gaussian of DP-ULR (paper 004,
Theorem 3.5). Each event names the neighbouring relation its bound is stated for.
"""

from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar, Literal, TypeVar

import dp_accounting
import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib
from scipy import stats

from ..errors import OpuHalError

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


def is_count(value: object) -> bool:
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
            cls.__post_init__ = __post_init__  # type: ignore[attr-defined]

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

    def library_event(self) -> "dp_accounting.DpEvent | None":
        """The equivalent ``dp_accounting`` event, or None when the library has none."""
        return None

    def pld_event(self, neighboring: Neighboring) -> "dp_accounting.DpEvent | None":
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
        return np.asarray(accountant._rdp, dtype=np.float64).copy()


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
                self.sampling_rate, self.noise_multiplier, orders[fractional])
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
        log_phi = -z**2 / (2 * sigma**2) - 0.5 * math.log(2 * math.pi * sigma**2)
        step = z[1] - z[0]
        weights = np.full(points, step)
        weights[[0, -1]] /= 2
        if float(np.max(t)) < 700 and q < 1:
            # A - 1 = E[(1 - q + q r)^alpha - 1]: integrate the difference, so a tiny A - 1 keeps its digits.
            log_a = math.log1p(float(np.sum(weights * np.exp(log_phi) * np.expm1(t))))
        else:
            log_a = float(np.logaddexp.reduce(log_phi + t + np.log(weights)))
        if not math.isfinite(log_a):
            raise PrivacyParameterError(f"sampled Gaussian RDP quadrature failed at q={q}, sigma={sigma}, alpha={alpha}")
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
        if not (is_count(self.dataset_size) and is_count(self.batch_size)
                and 1 <= self.batch_size <= self.dataset_size):
            raise PrivacyParameterError(
                f"need integers 1 <= batch_size <= dataset_size, got batch_size={self.batch_size!r}, "
                f"dataset_size={self.dataset_size!r}"
            )
        _positive("noise_multiplier", self.noise_multiplier, MAX_NOISE_MULTIPLIER)

    def library_event(self) -> dp_accounting.DpEvent:
        return dp_accounting.SampledWithoutReplacementDpEvent(
            self.dataset_size, self.batch_size, dp_accounting.GaussianDpEvent(self.noise_multiplier)
        )


@dataclass(frozen=True)
class PhotonicDFAEvent(Event):
    """One step of photonic DFA (Ohana et al., paper 000, Proposition 3, eq. 17), per layer.

    ``eps_PDFA(alpha) = C * 2 n_l alpha / (m sigma^2) * (g_max t_max tau_B)^2 / (g_min t_min)^2
                        + n_l alpha / (2 (alpha - 1)) * log(m g^2 / ((m + 1) g^2 - G^2))``

    with ``g = gamma_min tau_h_min``, ``G = gamma_max tau_h_max``; ``C = 1`` as eq. 17 states it.
    The appendix (eq. 19) and the derivation give the first term without ``n_l``
    (``first_term="appendix"``). ``log_term="alternative"`` uses the appendix's tighter
    ``log((m - 1) / m + G^2 / (m g^2))``. ``case="equal_covariance"`` is A.2 (log term 0),
    ``case="saturating"`` is A.3 (``eps = 2 alpha tau_B^2 / (m sigma^2)``). The curve is
    multiplied by ``columns`` (n_{l-1}) and ``layers`` (L) as the proposition composes them.

    **Not a valid RDP bound: the paper's claim, never a guarantee** (``is_guarantee = False``: the
    accountant reports it only through :meth:`Accountant.paper_claim_epsilon`, and a budget refuses
    it). The clipping of eq. 8-9 allows a replace-one pair with an unchanged mean whose per-coordinate
    variance ratio is ``r = ((m - 1) g^2 + G^2) / (m g^2)``; for that pair the Renyi divergence is
    infinite for ``alpha >= r / (r - 1)``, while eq. 17 is finite at every order. Example:
    ``n_l = 10, m = 16, sigma = 1e4, gamma_min = 0.5, gamma_max = 1, tau_h_min = tau_h_max = tau_b = 1``:
    eq. 17 gives epsilon 1.043 at delta 1e-5 (order 1024), but that pair alone needs 2.625 (closed
    form with chi-square laws; at epsilon 1.043 its delta is 5.8e-3, and a Monte Carlo of 4e6 draws
    gives 5.8e-3; ``tests/test_photonic_claim.py``). Photonic DP-DFA itself has no finite
    bound at all: see :class:`UnboundedEvent`.

    Doubts, kept visible: (i) the paper composes ``T`` epochs, not steps, although fresh noise is
    drawn at every step; by default the accountant composes per step. ``steps_per_epoch`` set to
    an integer reproduces the paper's per-epoch reading (each step adds 1/steps_per_epoch of an
    epoch) and is unsound for per-step noise. (ii) With ``gamma_min = 0`` (tanh without bounded
    pre-activations) or ``(m + 1) g^2 <= G^2`` the bound is infinite.
    """

    n_l: int
    batch_size: int
    sigma: float
    gamma_min: float
    gamma_max: float
    tau_h_min: float
    tau_h_max: float
    tau_b: float
    columns: int = 1
    layers: int = 1
    case: Literal["general", "equal_covariance", "saturating"] = "general"
    first_term: Literal["eq17", "appendix"] = "eq17"
    log_term: Literal["proposition", "alternative"] = "proposition"
    steps_per_epoch: int | None = None
    kind: ClassVar[str] = "photonic_dfa"
    relations: ClassVar[tuple[str, ...]] = ("replace_one",)
    is_guarantee: ClassVar[bool] = False

    def __post_init__(self) -> None:
        for name in ("n_l", "batch_size", "columns", "layers"):
            value = getattr(self, name)
            if not (is_count(value) and value >= 1):
                raise PrivacyParameterError(f"{name} must be an integer >= 1, got {value!r}")
        _positive("sigma", self.sigma)
        _positive("tau_b", self.tau_b)
        _positive("gamma_max", self.gamma_max)
        _positive("tau_h_max", self.tau_h_max)
        for name in ("gamma_min", "tau_h_min"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise PrivacyParameterError(f"{name} must be finite and >= 0, got {value!r}")
        if self.gamma_min > self.gamma_max or self.tau_h_min > self.tau_h_max:
            raise PrivacyParameterError("need gamma_min <= gamma_max and tau_h_min <= tau_h_max")
        if self.steps_per_epoch is not None and self.steps_per_epoch < 1:
            raise PrivacyParameterError(f"steps_per_epoch must be >= 1, got {self.steps_per_epoch}")

    def epsilon_pdfa(self, alpha: np.ndarray) -> np.ndarray:
        """``eps_PDFA(alpha)`` of eq. 17 (or its A.2 / A.3 cases) for one column of one layer."""
        alpha = np.asarray(alpha, dtype=np.float64)
        m, sigma = self.batch_size, self.sigma
        if self.case == "saturating":
            return 2 * alpha * self.tau_b**2 / (m * sigma**2)
        g = self.gamma_min * self.tau_h_min
        big = self.gamma_max * self.tau_h_max
        if g == 0:
            return np.full_like(alpha, np.inf)
        factor = self.n_l if self.first_term == "eq17" else 1
        first = factor * 2 * alpha / (m * sigma**2) * (big * self.tau_b) ** 2 / g**2
        if self.case == "equal_covariance":
            return first
        if self.log_term == "alternative":
            log_arg = (m - 1) / m + big**2 / (m * g**2)
        else:
            denominator = (m + 1) * g**2 - big**2
            if denominator <= 0:
                return np.full_like(alpha, np.inf)
            log_arg = m * g**2 / denominator
        with np.errstate(divide="ignore"):
            second = self.n_l * alpha / (2 * (alpha - 1)) * math.log(log_arg)
        return first + second

    def rdp(self, orders: np.ndarray, neighboring: Neighboring) -> np.ndarray:
        per_step = self.columns * self.layers * self.epsilon_pdfa(orders)
        if self.steps_per_epoch is not None:
            per_step = per_step / self.steps_per_epoch
        return per_step


@dataclass(frozen=True)
class SampledWithRejectionGaussianEvent(Event):
    """One step of DP-ULR's sampled-with-rejection Gaussian (paper 004, Definition 3.4,
    Theorem 3.5, eq. 9; Theorem 3.6, eq. 10, composes it over T steps):

    ``gamma(alpha) = q p(N_B - 1; N, q) / (1 - P(N_B - 1; N, q)) + 2 q^2 alpha / sigma^2``

    with ``p``/``P`` the binomial(N, q) pmf/cdf, ``N`` the minimum dataset size and ``sigma`` the
    noise multiplier (``sigma_0`` of DP-ULR's privacy controller). Valid only for
    ``1 <= N_B <= q N``, ``q <= 1/5``, ``sigma >= 4`` and ``1 < alpha <= sigma^2 A / 2 - 2 ln sigma``,
    ``alpha <= (sigma^2 A^2 / 2 - ln 5 - 2 ln sigma) / (A + ln(q alpha) + 1 / (2 sigma^2))``,
    ``A = ln(1 + 1 / (q (alpha - 1)))``: parameters outside are refused; orders outside get an
    infinite curve (they cannot be used), and a grid with no valid order is refused.
    Adjacency: add/remove one, as the Sampled Gaussian Mechanism it extends.
    """

    sampling_rate: float
    noise_multiplier: float
    min_batch_size: int
    min_dataset_size: int
    kind: ClassVar[str] = "sampled_with_rejection_gaussian"
    relations: ClassVar[tuple[str, ...]] = ("add_remove",)

    def __post_init__(self) -> None:
        q, sigma = self.sampling_rate, self.noise_multiplier
        _rate("sampling_rate", q)
        _positive("noise_multiplier", sigma)
        if q > 0.2:
            raise PrivacyParameterError(f"SRGM bound needs sampling_rate q <= 1/5, got {q}")
        if sigma < 4:
            raise PrivacyParameterError(f"SRGM bound needs noise_multiplier sigma_0 >= 4, got {sigma}")
        if not (is_count(self.min_dataset_size) and self.min_dataset_size > 1):
            raise PrivacyParameterError(f"min_dataset_size must be an integer > 1, got {self.min_dataset_size!r}")
        if not (is_count(self.min_batch_size)
                and 1 <= self.min_batch_size <= q * self.min_dataset_size):
            raise PrivacyParameterError(
                f"SRGM bound needs 1 <= N_B <= q * N = {q * self.min_dataset_size:g}, "
                f"got N_B = {self.min_batch_size!r}"
            )

    def order_is_valid(self, alpha: float) -> bool:
        """Whether Theorem 3.5's conditions on the order hold."""
        q, sigma = self.sampling_rate, self.noise_multiplier
        if alpha <= 1:
            return False
        a = math.log1p(1 / (q * (alpha - 1)))
        if alpha > 0.5 * sigma**2 * a - 2 * math.log(sigma):
            return False
        denominator = a + math.log(q * alpha) + 1 / (2 * sigma**2)
        numerator = 0.5 * sigma**2 * a**2 - math.log(5) - 2 * math.log(sigma)
        return denominator > 0 and alpha <= numerator / denominator

    def rejection_term(self) -> float:
        """``q p(N_B - 1; N, q) / (1 - P(N_B - 1; N, q))``: the price of rejecting small batches."""
        k, n, q = self.min_batch_size - 1, self.min_dataset_size, self.sampling_rate
        return q * float(stats.binom.pmf(k, n, q)) / float(stats.binom.sf(k, n, q))

    def gamma(self, alpha: float) -> float:
        """eq. 9 at one order; refused outside the theorem's range."""
        if not self.order_is_valid(alpha):
            raise PrivacyParameterError(
                f"order alpha = {alpha} is outside Theorem 3.5's valid range for q = "
                f"{self.sampling_rate}, sigma = {self.noise_multiplier}"
            )
        return self.rejection_term() + 2 * self.sampling_rate**2 * alpha / self.noise_multiplier**2

    def rdp(self, orders: np.ndarray, neighboring: Neighboring) -> np.ndarray:
        curve = np.array([self.gamma(a) if self.order_is_valid(a) else np.inf for a in orders])
        if not np.isfinite(curve).any():
            raise PrivacyParameterError(
                f"no order of the accountant's grid satisfies Theorem 3.5 for q = "
                f"{self.sampling_rate}, sigma = {self.noise_multiplier}"
            )
        return curve


PHOTONIC_DP_UNBOUNDED_REASON = (
    "photonic DP-DFA (paper 000, eq. 8) multiplies the noisy projection by h^T, so every update lies in "
    "the span of the batch's clipped inputs h_i and the noise cannot hide a direction: for a dataset "
    "whose other clipped inputs share one direction and a neighbour whose input does not, the update "
    "has rank 1 without it and rank 2 whenever it is sampled, so delta >= m/N at every epsilon and the "
    "Renyi divergence is infinite at every order; eq. 17 is only the paper's claim")


@dataclass(frozen=True)
class UnboundedEvent(Event):
    """A mechanism with no finite bound: infinite at every order (sound), with the reason.

    Photonic DP-DFA is charged this way (``PHOTONIC_DP_UNBOUNDED_REASON``): the noise ``g`` of eq. 8
    is added to the projection ``B e`` and then multiplied by ``phi'(z) h^T``, so the released
    update ``sum_i ((s_i + g_i) * phi'_i) h_i^T / m`` lies in ``span{h_i}`` whatever the noise. Take
    a dataset whose clipped inputs all equal ``h_0`` and a replace-one neighbour with one input
    ``h' != h_0`` (in direction): without it every update has rank 1, with it (probability ``m/N``
    per step for fixed-size batches) rank 2 almost surely. The two update laws are mutually
    singular on that event, so no ``(epsilon, delta)`` with ``delta < m / N`` holds and every Renyi
    divergence is infinite (``tests/test_photonic_claim.py`` shows the ranks on the trainer's own
    update). A sound photonic mechanism adds its noise to the update itself:
    ``dp-dfa --noise-source device``.
    """

    reason: str
    kind: ClassVar[str] = "unbounded"
    relations: ClassVar[tuple[str, ...]] = ("add_remove", "replace_one")

    def rdp(self, orders: np.ndarray, neighboring: Neighboring) -> np.ndarray:
        return np.full(np.shape(orders), np.inf)


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
                f"ComposedEvent parts share no neighbouring relation, so no accountant can compose them ({stated})")

    @property
    def is_guarantee(self) -> bool:  # type: ignore[override]
        return all(part.is_guarantee for part in self.parts)

    @property
    def relations(self) -> tuple[str, ...]:  # type: ignore[override]
        common = set(self.parts[0].relations)
        for part in self.parts[1:]:
            common &= set(part.relations)
        return tuple(sorted(common))

    def rdp(self, orders: np.ndarray, neighboring: Neighboring) -> np.ndarray:
        return np.sum([part.rdp(orders, neighboring) for part in self.parts], axis=0)

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


for _cls in (GaussianEvent, PoissonGaussianEvent, FixedSizeGaussianEvent, PhotonicDFAEvent,
             SampledWithRejectionGaussianEvent, UnboundedEvent, ComposedEvent):
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
