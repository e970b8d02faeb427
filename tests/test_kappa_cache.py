"""The rounding analysis's kappa curves: the vectorised computation equals the per-order one it
replaced, and a curve kept on disk equals the direct computation, under a key naming every input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import logsumexp

from opu_hal.privacy import kappa_cache, rounding


def _near_one_order(alpha: int, poisson_mean: float) -> float:
    """The near bound of one order, written as the module docstring states it (one order at a time)."""
    a, b, log_g = rounding._near_terms(poisson_mean)
    second = math.comb(alpha, 2) * (math.sqrt(a) + math.sqrt(b)) ** 2
    i = np.arange(3, alpha + 1)
    higher = float(np.exp(logsumexp(rounding._log_binomial(alpha, i) + log_g[i]))) if alpha >= 3 else 0.0
    return (second + higher) / (alpha - 1)


def _far_one_order(alpha: int, poisson_mean: float) -> float:
    """The far bound of one order over the full grid (every shift, every theta cell), no pruning."""
    shifts = np.arange(1, rounding._SHIFT_SEARCH + 1, dtype=np.float64)[:, None]
    edges = np.linspace(0.0, 1.0, rounding._THETA_CELLS + 1)[None, :]
    low, high = edges[:, :-1], edges[:, 1:]
    e_s = (alpha - 1) * rounding.integer_shift_rdp(alpha, shifts, poisson_mean)
    e_next = (alpha - 1) * rounding.integer_shift_rdp(alpha, shifts + 1, poisson_mean)
    with np.errstate(divide="ignore"):
        numerator = np.logaddexp(np.log1p(-high) + e_s, np.log(high) + e_next) / (alpha - 1)
    best = float(np.max(numerator / (shifts + low) ** 2))
    tail = float(rounding.integer_shift_rdp(alpha, np.array(rounding._SHIFT_SEARCH + 1.0), poisson_mean))
    return max(best, tail / rounding._SHIFT_SEARCH**2)


@pytest.mark.parametrize("poisson_mean", [4.0, 37.5, 539.0])
def test_vectorised_curve_equals_the_order_by_order_bound(poisson_mean):
    alphas = np.arange(2, rounding.MAX_ORDER + 1)
    direct = [max(_near_one_order(a, poisson_mean), _far_one_order(a, poisson_mean)) for a in alphas]
    assert np.allclose(rounding._compute_coefficients(poisson_mean), direct, rtol=1e-12, atol=0)


def test_a_stored_curve_equals_the_direct_computation(tmp_path, monkeypatch):
    monkeypatch.setenv("OPU_HAL_CACHE", str(tmp_path))
    monkeypatch.setattr(kappa_cache, "STORE_AFTER_S", 0.0)  # store every curve
    direct = rounding._compute_coefficients(123.25)
    first = kappa_cache.cached_coefficients(123.25, rounding._compute_coefficients, rounding.MAX_ORDER - 1)
    assert list((tmp_path / kappa_cache.CACHE_FOLDER).iterdir())  # it was stored

    def refuse(mean: float) -> np.ndarray:
        raise AssertionError("the stored curve should have been read")

    refuse.__module__ = rounding._compute_coefficients.__module__  # the same key
    again = kappa_cache.cached_coefficients(123.25, refuse, rounding.MAX_ORDER - 1)
    assert np.array_equal(first, direct) and np.array_equal(again, direct)


def test_the_key_names_the_mean_and_the_computing_source(tmp_path, monkeypatch):
    monkeypatch.setenv("OPU_HAL_CACHE", str(tmp_path))
    key = kappa_cache.coefficients_key(100.0, rounding._compute_coefficients)
    assert key != kappa_cache.coefficients_key(100.0 * (1 + 1e-15), rounding._compute_coefficients)
    monkeypatch.setattr(kappa_cache, "source_digest", lambda name: "another source")
    assert key != kappa_cache.coefficients_key(100.0, rounding._compute_coefficients)


def test_a_corrupt_or_short_stored_curve_is_recomputed(tmp_path, monkeypatch):
    monkeypatch.setenv("OPU_HAL_CACHE", str(tmp_path))
    key = kappa_cache.coefficients_key(50.0, rounding._compute_coefficients)
    for bad in ([1.0, 2.0], [-1.0] * (rounding.MAX_ORDER - 1), "x"):
        kappa_cache.write_entry(kappa_cache.CACHE_FOLDER, key, bad)
        got = kappa_cache.cached_coefficients(50.0, rounding._compute_coefficients, rounding.MAX_ORDER - 1)
        assert np.array_equal(got, rounding._compute_coefficients(50.0))
