"""Events of the papers' own mechanisms: photonic DFA's published claim (paper 000, not a
guarantee), DP-ULR's sampling with rejection (paper 004, Theorem 3.5; its privacy controller's
charge is the paper's claim, not a guarantee) and a mechanism with no
bound at all. Registered for ledgers at import (``opu_hal.privacy`` imports this module)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
from scipy import stats

from .events import Event, Neighboring, PrivacyParameterError, _positive, _rate, is_count, register_event


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
    claim_source: ClassVar[str] = "paper 000, eq. 17"

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
        curve: np.ndarray = first + second
        return curve

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
        if not (is_count(self.min_batch_size) and 1 <= self.min_batch_size <= q * self.min_dataset_size):
            raise PrivacyParameterError(
                f"SRGM bound needs 1 <= N_B <= q * N = {q * self.min_dataset_size:g}, got N_B = {self.min_batch_size!r}"
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


@dataclass(frozen=True)
class ControllerClaimEvent(SampledWithRejectionGaussianEvent):
    """One step of DP-ULR with paper 004's privacy controller (eq. 7), charged as the paper does:
    Theorem 3.5's curve at ``sigma_0`` (same parameters, same curve as the parent class).

    **The paper's claim, never a guarantee** (``is_guarantee = False``: the accountant reports it only
    through :meth:`Accountant.paper_claim_epsilon`, or with ``claimed=True`` for planning and budgets).
    Theorem 3.5 needs Gaussian noise of std ``sigma_0 C`` on the released clipped sum; eq. 7 sets the
    covariance of the proxies *before* clipping, and after clipping to ``C`` the sum's covariance has
    smallest eigenvalue at most ``|B| C^2 / d`` (trace <= ``|B| C^2``), below ``sigma_0^2 C^2`` unless
    ``|B| >= sigma_0^2 d`` (docs/trainers.md, "DP-ULR and DP-MAC: options and doubts"). The sound
    mode (``mode=gaussian``) adds the noise to the clipped sum and is charged the parent class."""

    kind: ClassVar[str] = "dp_ulr_controller_claim"
    is_guarantee: ClassVar[bool] = False
    claim_source: ClassVar[str] = "paper 004, eq. 7 and Theorem 3.5"


PHOTONIC_DP_UNBOUNDED_REASON = (
    "photonic DP-DFA (paper 000, eq. 8) multiplies the noisy projection by h^T, so every update lies in "
    "the span of the batch's clipped inputs h_i and the noise cannot hide a direction: for a dataset "
    "whose other clipped inputs share one direction and a neighbour whose input does not, the update "
    "has rank 1 without it and rank 2 whenever it is sampled, so delta >= m/N at every epsilon and the "
    "Renyi divergence is infinite at every order; eq. 17 is only the paper's claim"
)


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


for _cls in (PhotonicDFAEvent, SampledWithRejectionGaussianEvent, ControllerClaimEvent, UnboundedEvent):
    register_event(_cls)
