"""Privacy amplification by subsampling without replacement for a general RDP curve (shared by the
Skellam events of :mod:`.skellam` and :mod:`.rounding`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy.special import gammaln

from .events import Event, Neighboring, PrivacyParameterError, _rate


def check_fixed_batch(dataset_size: int, batch_size: int) -> None:
    """Refuse a fixed-size batch that is not ``1 <= batch_size <= dataset_size`` (whole numbers)."""
    for name, value in (("dataset_size", dataset_size), ("batch_size", batch_size)):
        if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            raise PrivacyParameterError(f"{name} must be an integer >= 1, got {value!r}")
    if batch_size > dataset_size:
        raise PrivacyParameterError(f"need batch_size <= dataset_size, got {batch_size} > {dataset_size}")


def integer_orders(orders: np.ndarray) -> np.ndarray:
    orders = np.asarray(orders, dtype=np.float64)
    whole: np.ndarray = (orders > 1) & np.isfinite(orders) & (orders == np.floor(orders))
    return whole


def _log_comb(n: int, k: np.ndarray) -> np.ndarray:
    return gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)


def subsampled_without_replacement_rdp(
    base: Callable[[np.ndarray], np.ndarray], sampling_rate: float, orders: np.ndarray
) -> np.ndarray:
    """Wang-Balle-Kasiviswanathan 2019, Theorem 9, for a base mechanism with ``eps(inf) = inf``:

        eps'(alpha) <= log(1 + q^2 C(alpha, 2) min(4 (e^eps(2) - 1), 2 e^eps(2))
                           + sum_{j=3}^{alpha} q^j C(alpha, j) 2 e^{(j - 1) eps(j)}) / (alpha - 1)

    at integer orders (inf elsewhere), and never above ``base(alpha)``."""
    orders = np.asarray(orders, dtype=np.float64)
    q = sampling_rate
    out = np.full_like(orders, np.inf)
    if q == 1:
        return np.where(integer_orders(orders), base(orders), np.inf)
    for index, alpha in enumerate(orders):
        if not integer_orders(np.array([alpha]))[0]:
            continue
        a = int(alpha)
        eps2 = float(base(np.array([2.0]))[0])
        second = (
            2 * math.log(q)
            + float(_log_comb(a, np.array([2]))[0])
            + min(math.log(4) + eps2 + math.log(-math.expm1(-eps2)) if eps2 > 0 else -math.inf, eps2 + math.log(2))
        )
        terms = [0.0, second]
        if a >= 3:
            j = np.arange(3, a + 1, dtype=np.float64)
            terms.extend(j * math.log(q) + _log_comb(a, j) + math.log(2) + (j - 1) * base(j))
        log_a = float(np.logaddexp.reduce(np.asarray(terms)))
        out[index] = min(log_a / (a - 1), float(base(np.array([alpha]))[0]))
    return out


def check_sampling_rate(sampling_rate: float) -> None:
    """Refuse a Poisson sampling rate outside ``(0, 1]``."""
    _rate("sampling_rate", sampling_rate)


def poisson_subsampled_rdp(
    base: Callable[[np.ndarray], np.ndarray], sampling_rate: float, orders: np.ndarray
) -> np.ndarray:
    """Zhu and Wang 2019 ("Poisson Subsampled Renyi Differential Privacy", ICML, Theorem 6, the
    general upper bound; add/remove neighbours), for any base mechanism with RDP curve ``base``:

        eps'(alpha) <= log((1 - q)^(alpha - 1) (alpha q - q + 1)
                           + C(alpha, 2) q^2 (1 - q)^(alpha - 2) e^eps(2)
                           + 3 sum_{l=3}^{alpha} C(alpha, l) q^l (1 - q)^(alpha - l) e^{(l - 1) eps(l)}) / (alpha - 1)

    at integer orders (inf elsewhere), and never above ``base(alpha)`` (joint convexity: every pair of
    subsamples differs in at most one example). ``base`` is evaluated once, on ``2 .. max order``."""
    check_sampling_rate(sampling_rate)
    orders = np.asarray(orders, dtype=np.float64)
    whole = integer_orders(orders)
    out = np.full_like(orders, np.inf)
    if not np.any(whole):
        return out
    q = float(sampling_rate)
    own = base(orders[whole])
    if q == 1:
        out[whole] = own
        return out
    top = int(orders[whole].max())
    ells = np.arange(2, top + 1, dtype=np.float64)
    scaled = (ells - 1) * np.asarray(base(ells), dtype=np.float64)  # (l - 1) eps(l), l = 2 .. top
    log_q, log_p = math.log(q), math.log1p(-q)
    for index, alpha, cap in zip(np.flatnonzero(whole), orders[whole], own):
        a = int(alpha)
        ell = ells[: a - 1]
        terms = _log_comb(a, ell) + ell * log_q + (a - ell) * log_p + scaled[: a - 1]
        terms[1:] += math.log(3)
        first = (a - 1) * log_p + math.log1p((a - 1) * q)
        with np.errstate(invalid="ignore"):
            bound = float(np.logaddexp.reduce(np.concatenate(([first], terms)))) / (a - 1)
        out[index] = min(bound, float(cap))
    return out


@dataclass(frozen=True)
class PoissonSampled(Event):
    """Mixin for an event of one release on a Poisson-sampled batch (each example included with
    probability ``sampling_rate``; add/remove): the next class in the MRO gives the release's own curve,
    amplified by :func:`poisson_subsampled_rdp`. Use as ``class E(PoissonSampled, BaseEvent)``."""

    sampling_rate: float = 1.0
    relations: ClassVar[tuple[str, ...]] = ("add_remove",)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_sampling_rate(self.sampling_rate)

    def rdp(self, orders: np.ndarray, neighboring: Neighboring) -> np.ndarray:
        def base(alphas: np.ndarray) -> np.ndarray:
            return super(PoissonSampled, self).rdp(alphas, neighboring)  # type: ignore[safe-super]  # the concrete event after the mixin

        return poisson_subsampled_rdp(base, self.sampling_rate, orders)
