"""The Skellam mechanism on a lattice: accounting for integer noise made of photo-electron counts.

**Why.** A camera counts photo-electrons: the noise it produces is integer-valued. Adding
lattice-valued noise to a continuous update leaks the update's position inside the lattice cell
exactly (issue 12: 100/100 distinguishing through dp-dfa). Mechanisms that use device noise
therefore work on integers (DESIGN.md, "Discrete noise").

**Mechanism** (for a query ``u(D) in R^d`` of L2 sensitivity ``Delta`` under the accountant's
neighbouring relation):

1. scale to the lattice, ``x = gamma u``, with ``gamma Delta = k sqrt(d)`` (``k``: the lattice
   resolution, :class:`SkellamLattice`);
2. round every coordinate randomly and without bias, ``R(x)_j = floor(x_j) + Bernoulli(frac x_j)``,
   with uniforms from the secure generator;
3. add ``K_j = C1_j - C2_j``, where ``C1``, ``C2`` are independent sums of photo-electron counts
   with Poisson means ``>= lambda`` each (so ``K_j`` is Skellam(lambda, lambda) plus independent
   noise, see below); release ``(R(x) + K) / gamma``.

**Sensitivity after rounding.** Couple the roundings of neighbouring ``x``, ``x'`` through the same
uniforms: their difference ``D`` has ``|D_j| <= ceil(|x_j - x'_j|) < |x_j - x'_j| + 1``, so
``||D||_2 <= gamma Delta + sqrt(d) = (k + 1) sqrt(d)`` and
``||D||_1 <= sqrt(d) gamma Delta + d = (k + 1) d``. The released distributions are mixtures, over
the shared uniforms, of shifted Skellam laws; ``exp((alpha - 1) D_alpha)`` is jointly convex, so
the mechanism's Renyi divergence is at most the largest over the coupled pairs: the Skellam
mechanism's at those sensitivities.

**Skellam RDP** (Agarwal, Kairouz and Liu, "The Skellam Mechanism for Differentially Private
Federated Learning", NeurIPS 2021, Theorem 3.5 / Corollary 3.6; stated there for noise of variance
``mu = 2 lambda``): for integer ``alpha > 1`` and integer-valued queries of L1 / L2 sensitivity
``Delta_1`` / ``Delta_2``,

    eps(alpha) <= alpha Delta_2^2 / (4 lambda)
                  + min(((2 alpha - 1) Delta_2^2 + 6 Delta_1) / (16 lambda^2), 3 Delta_1 / (4 lambda)).

Non-integer orders get ``inf`` (the theorem does not cover them).

**What may count as noise.** Only the Poisson counts. ``Sk(lambda_j) = Sk(lambda) + Sk(lambda_j -
lambda)`` in law for ``lambda_j >= lambda`` (Poisson additivity), and two counts of different
means ``>= lambda`` are ``Sk(lambda)`` plus independent noise: in every case the release is a
post-processing of the Skellam mechanism with mean ``lambda`` (the LOWER bound of the means).
Read noise and ADC rounding count only where they provably cannot reduce privacy: at a gain of
``1/n`` e-/DN (``n`` a whole number), ``DN = n P + round(n G)`` exactly, so the count read in
electrons is ``P`` plus independent noise (post-processing). Other gains are refused by the device.

**Subsampling.** DP-DFA draws fixed-size batches without replacement (replace-one): the amplified
curve is the general bound of Wang, Balle and Kasiviswanathan 2019 ("Subsampled Renyi Differential
Privacy and Analytical Moments Accountant", Theorem 9) for a base mechanism whose
``eps(infinity) = infinity``, capped by the unamplified curve (joint convexity again). With
``--sampling poisson`` every example joins each batch with probability ``q = m / N`` (add/remove, so
the sensitivity is one example's clipped term, not two): the amplified curve is Zhu and Wang's general
upper bound for any base mechanism ("Poisson Subsampled Renyi Differential Privacy", ICML 2019,
Theorem 6), capped the same way (:func:`.subsampling.poisson_subsampled_rdp`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from .events import Event, Neighboring, PrivacyParameterError, _positive, register_event
from .inverse import smallest_noise_multiplier
from .rounding import FixedSizeRoundedSkellamEvent, PoissonRoundedSkellamEvent
from .subsampling import (
    PoissonSampled,
    check_fixed_batch,
    integer_orders,
    subsampled_without_replacement_rdp,
)

if TYPE_CHECKING:
    from .run_shape import RunShape


def skellam_rdp(orders: np.ndarray, l2_sensitivity: float, l1_sensitivity: float, poisson_mean: float) -> np.ndarray:
    """Agarwal-Kairouz-Liu bound (Theorem 3.5) for Skellam(lambda, lambda) noise; inf at non-integer
    orders. ``poisson_mean`` is ``lambda``, the mean of each of the two counts."""
    orders = np.asarray(orders, dtype=np.float64)
    lam, d2sq, d1 = poisson_mean, l2_sensitivity**2, l1_sensitivity
    with np.errstate(over="ignore", invalid="ignore"):
        curve = orders * d2sq / (4 * lam) + np.minimum(
            ((2 * orders - 1) * d2sq + 6 * d1) / (16 * lam**2), 3 * d1 / (4 * lam)
        )
    return np.where(integer_orders(orders), curve, np.inf)


ANALYSES = ("per-coordinate", "worst-case")
#: The samplings the lattice events cover, and the neighbouring relation each is accounted under.
LATTICE_SAMPLINGS: dict[str, Neighboring] = {"fixed": "replace_one", "poisson": "add_remove"}


def lattice_relation(sampling: str) -> Neighboring:
    """The neighbouring relation a lattice event of ``sampling`` is accounted under, or refuse."""
    if sampling not in LATTICE_SAMPLINGS:
        raise PrivacyParameterError(
            "the lattice mechanisms (device noise) are accounted for fixed-size batches (replace-one) or "
            f"Poisson sampling (add/remove), got sampling {sampling!r}"
        )
    return LATTICE_SAMPLINGS[sampling]


@dataclass(frozen=True)
class SkellamLattice:
    """The lattice of a release: ``gamma`` (lattice units per update unit) from the resolution ``k``,
    and the sensitivities the accountant charges, by the rounding ``analysis``:

    - ``worst-case`` (module doc): ``gamma Delta = k sqrt(d)``, sensitivities ``(k + 1) sqrt(d)`` and
      ``(k + 1) d``; the noise is ``z Delta (k + 1) / k`` and ``lambda`` grows as ``d (k + 1)^2``.
    - ``per-coordinate`` (:mod:`.rounding`): ``gamma Delta = k`` and the charged L2 sensitivity is
      ``k`` itself (no rounding term): ``lambda = (z k)^2 / 2`` whatever ``d``, and the noise is
      ``z Delta`` (the rounding adds at most 1/4 lattice unit^2 of variance, never counted).

    Noise in update units has std ``sqrt(2 lambda) / gamma`` (``z`` the Gaussian-equivalent noise
    multiplier: ``lambda = (z Delta_2)^2 / 2`` in lattice units).
    """

    dimension: int
    sensitivity: float
    resolution: float = 10.0
    analysis: str = "worst-case"

    def __post_init__(self) -> None:
        if not (isinstance(self.dimension, int) and not isinstance(self.dimension, bool) and self.dimension >= 1):
            raise PrivacyParameterError(f"dimension must be an integer >= 1, got {self.dimension!r}")
        _positive("sensitivity", self.sensitivity)
        _positive("resolution", self.resolution)
        if self.analysis not in ANALYSES:
            raise PrivacyParameterError(f"rounding analysis {self.analysis!r}: choose one of {', '.join(ANALYSES)}")

    @property
    def per_coordinate(self) -> bool:
        return self.analysis == "per-coordinate"

    @property
    def gamma(self) -> float:
        scale = 1.0 if self.per_coordinate else math.sqrt(self.dimension)
        return self.resolution * scale / self.sensitivity

    @property
    def l2_sensitivity(self) -> float:
        if self.per_coordinate:
            return self.resolution
        return (self.resolution + 1) * math.sqrt(self.dimension)

    @property
    def l1_sensitivity(self) -> float:
        return (self.resolution + 1) * self.dimension

    def event(self, dataset_size: int, batch_size: int, noise_multiplier: float, sampling: str = "fixed") -> Event:
        """The event of one release at ``noise_multiplier`` under this analysis: a fixed-size batch
        (replace-one), or with ``sampling="poisson"`` each example included with probability
        ``batch_size / dataset_size`` (add/remove)."""
        mean = self.poisson_mean(noise_multiplier)
        if sampling == "poisson":
            rate = batch_size / dataset_size
            if self.per_coordinate:
                return PoissonRoundedSkellamEvent(self.l2_sensitivity, mean, sampling_rate=rate)
            return PoissonSkellamEvent(self.l2_sensitivity, self.l1_sensitivity, mean, sampling_rate=rate)
        lattice_relation(sampling)
        if self.per_coordinate:
            return FixedSizeRoundedSkellamEvent(dataset_size, batch_size, self.l2_sensitivity, mean)
        return FixedSizeSkellamEvent(dataset_size, batch_size, self.l2_sensitivity, self.l1_sensitivity, mean)

    def poisson_mean(self, noise_multiplier: float) -> float:
        """``lambda`` giving Skellam variance ``2 lambda = (z Delta_2)^2`` in lattice units."""
        return (noise_multiplier * self.l2_sensitivity) ** 2 / 2

    def noise_std(self, poisson_mean: float) -> float:
        """Std of the Skellam noise in update units, ``sqrt(2 lambda) / gamma``."""
        return math.sqrt(2 * poisson_mean) / self.gamma


@dataclass(frozen=True)
class SkellamEvent(Event):
    """One release of the lattice Skellam mechanism (no subsampling); sensitivities in lattice units
    under the accountant's relation, ``poisson_mean`` = ``lambda`` of each count."""

    l2_sensitivity: float
    l1_sensitivity: float
    poisson_mean: float
    kind: ClassVar[str] = "skellam"
    relations: ClassVar[tuple[str, ...]] = ("add_remove", "replace_one")

    def __post_init__(self) -> None:
        _positive("l2_sensitivity", self.l2_sensitivity)
        _positive("l1_sensitivity", self.l1_sensitivity)
        _positive("poisson_mean", self.poisson_mean)

    def rdp(self, orders: np.ndarray, neighboring: Neighboring) -> np.ndarray:
        return skellam_rdp(orders, self.l2_sensitivity, self.l1_sensitivity, self.poisson_mean)


@dataclass(frozen=True)
class FixedSizeSkellamEvent(Event):
    """The lattice Skellam mechanism on a batch of ``batch_size`` drawn without replacement from
    ``dataset_size`` examples (replace-one; Wang-Balle-Kasiviswanathan Theorem 9), as DP-DFA with
    device noise uses it."""

    dataset_size: int
    batch_size: int
    l2_sensitivity: float
    l1_sensitivity: float
    poisson_mean: float
    kind: ClassVar[str] = "fixed_size_skellam"
    relations: ClassVar[tuple[str, ...]] = ("replace_one",)

    def __post_init__(self) -> None:
        check_fixed_batch(self.dataset_size, self.batch_size)
        _positive("l2_sensitivity", self.l2_sensitivity)
        _positive("l1_sensitivity", self.l1_sensitivity)
        _positive("poisson_mean", self.poisson_mean)

    def rdp(self, orders: np.ndarray, neighboring: Neighboring) -> np.ndarray:
        def base(alphas: np.ndarray) -> np.ndarray:
            return skellam_rdp(alphas, self.l2_sensitivity, self.l1_sensitivity, self.poisson_mean)

        return subsampled_without_replacement_rdp(base, self.batch_size / self.dataset_size, orders)


@dataclass(frozen=True)
class PoissonSkellamEvent(PoissonSampled, SkellamEvent):
    """:class:`SkellamEvent` on a batch in which every example is included with probability
    ``sampling_rate`` (add/remove; Zhu and Wang 2019, Theorem 6)."""

    kind: ClassVar[str] = "poisson_skellam"


for _cls in (SkellamEvent, FixedSizeSkellamEvent, PoissonSkellamEvent):
    register_event(_cls)


def required_poisson_mean(target_epsilon: float, delta: float, shape: RunShape) -> float:
    """Smallest Poisson mean per count (``lambda``) for which the lattice Skellam mechanism reaches
    ``(target_epsilon, delta)`` over the described run: ``shape`` (a calibration ``RunShape``)
    gives ``dataset_size``, ``batch_size``, ``steps``, ``dimension`` ``d`` and
    ``lattice_resolution`` ``k``; sampling ``fixed`` (replace-one, WBK Theorem 9) or ``poisson``
    (add/remove, Zhu-Wang Theorem 6). The lattice makes the answer independent of the update's scale: the
    sensitivities are ``(k + 1) sqrt(d)`` and ``(k + 1) d`` lattice units (:class:`SkellamLattice`)."""
    sampling = getattr(shape, "sampling", "fixed")
    relation = lattice_relation(sampling)
    dimension, resolution = getattr(shape, "dimension", None), getattr(shape, "lattice_resolution", None)
    if not (isinstance(dimension, int) and dimension >= 1 and resolution is not None and resolution > 0):
        raise PrivacyParameterError(
            "the lattice Skellam mechanism needs the update's dimension d >= 1 (--dimension) and the lattice "
            f"resolution k > 0 (--lattice-resolution); got d={dimension!r}, k={resolution!r}"
        )
    analysis = getattr(shape, "rounding_analysis", None) or "worst-case"
    lattice = SkellamLattice(dimension, 1.0, float(resolution), analysis)

    def event_for(z: float) -> Event:
        return lattice.event(shape.dataset_size, shape.batch_size, z, sampling)

    z = smallest_noise_multiplier(event_for, shape.steps, target_epsilon, delta, relation)
    return lattice.poisson_mean(z)
