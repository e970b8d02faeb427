"""The accountant's argument checks: a delta in (0, 1), a whole step count, a grid of RDP orders."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .events import PrivacyParameterError, is_count, is_real


def check_delta(delta: float) -> None:
    """Refuse a delta outside (0, 1)."""
    if not (is_real(delta) and 0 < delta < 1):
        raise PrivacyParameterError(f"delta must be in (0, 1), got {delta!r}")


def check_count(count: object) -> int:
    """A whole number of steps >= 0, as an int."""
    if not (is_count(count) and count >= 0):
        raise PrivacyParameterError(f"count must be a whole number >= 0, got {count!r}")
    return int(count)


def check_orders(orders: Sequence[float]) -> np.ndarray:
    """A non-empty 1-D grid of finite RDP orders > 1, as float64."""
    try:
        values = np.asarray(orders, dtype=np.float64)
    except (TypeError, ValueError):
        raise PrivacyParameterError(f"orders must be numbers, got {orders!r}") from None
    if values.ndim != 1 or values.size == 0 or not np.all(np.isfinite(values)) or not np.all(values > 1):
        raise PrivacyParameterError(
            f"orders must be a non-empty list of finite numbers > 1, got {list(np.ravel(values))}"
        )
    return values
