"""The rounding analysis's ``kappa_alpha(lambda)`` curves (:mod:`.rounding`) kept on disk where one
takes long to compute (large Poisson means: the sums run over ``90 sqrt(2 lambda)`` integers).

An entry is keyed on every input of the computation: the Poisson mean (its exact float), the source
of the module that computes it (so any change to the bound or its constants is a new key), and the
numpy and scipy versions; it is read back only under that key, and only as a full curve of positive
finite numbers. A cache that cannot be read or written costs time, never a bound
(:mod:`opu_hal.runtime.cache`); ``tests/test_kappa_cache.py`` checks that a stored curve equals the
direct computation.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import math
import time
from collections.abc import Callable

import numpy as np
import scipy

from ..runtime.cache import cache_key, read_entry, write_entry

CACHE_FOLDER = "rounding-kappa"
#: A curve is stored when computing it took longer than this (s); shorter ones are recomputed.
STORE_AFTER_S = 0.5

Compute = Callable[[float], np.ndarray]


@functools.lru_cache(maxsize=8)
def source_digest(module_name: str) -> str:
    """SHA-256 of a module's source: a cached curve is keyed on the code that computed it."""
    module = __import__(module_name, fromlist=["_"])
    return hashlib.sha256(inspect.getsource(module).encode()).hexdigest()


def coefficients_key(poisson_mean: float, compute: Compute) -> str:
    """The key of the curve ``compute(poisson_mean)``: the mean, the computing module's source, numpy and scipy."""
    return cache_key(
        "kappa",
        repr(float(poisson_mean)),
        compute.__module__,
        source_digest(compute.__module__),
        np.__version__,
        scipy.__version__,
    )


def _curve(stored: object, length: int | None) -> np.ndarray | None:
    """``stored`` as a curve when it is a list of ``length`` positive finite numbers, else None."""
    if not isinstance(stored, list) or (length is not None and len(stored) != length) or not stored:
        return None
    if not all(isinstance(v, float) and math.isfinite(v) and v > 0 for v in stored):
        return None
    return np.array(stored, dtype=np.float64)


def cached_coefficients(poisson_mean: float, compute: Compute, length: int | None = None) -> np.ndarray:
    """``compute(poisson_mean)``, read from the cache under :func:`coefficients_key` when stored there,
    else computed (and stored when that took longer than :data:`STORE_AFTER_S`)."""
    key = coefficients_key(poisson_mean, compute)
    stored = _curve(read_entry(CACHE_FOLDER, key), length)
    if stored is not None:
        return stored
    start = time.perf_counter()
    curve = compute(poisson_mean)
    if time.perf_counter() - start > STORE_AFTER_S and _curve(curve.tolist(), length) is not None:
        write_entry(CACHE_FOLDER, key, curve.tolist())
    return curve
