"""The vectorised sampled-without-replacement Gaussian RDP against dp_accounting's own (the independent
reference): equal within 1e-9 relative, never below, over sampling rates, multipliers and orders, including
fractional orders, orders above the library's exact range (256) and order infinity."""

from __future__ import annotations

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

from opu_hal.privacy import Accountant, FixedSizeGaussianEvent
from opu_hal.privacy.fixed_size_gaussian import fixed_size_gaussian_rdp, log_forward_differences

# The library's own grid is 0.9 s a curve; this one keeps its kinds (fractional, integer, 128-256 where the
# forward differences run longest, above 256, infinity) at 0.3 s.
ORDERS = np.array([1.01, 1.1, 1.5, 2, 2.5, 3, 3.7, 5, 10.9, 16, 63, 128, 200.5, 256, 300, 1024, 2000.5, np.inf])


def _library(q: float, sigma: float, orders: np.ndarray) -> np.ndarray:
    return np.asarray(rdp_lib._compute_rdp_sample_wor_gaussian(q, sigma, orders), dtype=np.float64)


@pytest.mark.parametrize("q", [1e-6, 64 / 20_000, 0.3, 0.99])
@pytest.mark.parametrize("sigma", [0.1, 0.7, 20.0])
def test_curve_equals_the_library_within_1e_9_and_never_below(q: float, sigma: float) -> None:
    ours, reference = fixed_size_gaussian_rdp(q, sigma, ORDERS), _library(q, sigma, ORDERS)
    assert np.array_equal(np.isfinite(ours), np.isfinite(reference))
    finite = np.isfinite(reference)
    assert (ours[finite] >= reference[finite]).all()
    np.testing.assert_allclose(ours[finite], reference[finite], rtol=1e-9, atol=0)


def test_forward_differences_match_the_library_where_they_cancel() -> None:
    """At sigma = 20 the high differences are rounding noise; they are the library's noise, bit for bit."""
    sigma = 20.0
    reference, _ = rdp_lib._get_forward_diffs(lambda x: x * 1.0 * (x + 1) / (2.0 * sigma**2), 60)
    np.testing.assert_array_equal(log_forward_differences(sigma, 60), reference)


def test_whole_batch_is_the_unsampled_gaussian() -> None:
    np.testing.assert_array_equal(fixed_size_gaussian_rdp(1.0, 2.0, np.array([2.0, 7.5])), [2 / 8, 7.5 / 8])


@pytest.mark.parametrize(("q", "sigma", "orders"), [(0.0, 1.0, [2.0]), (0.5, 0.0, [2.0]), (0.5, 1.0, [0.5])])
def test_bad_input_is_refused_naming_the_allowed_range(q: float, sigma: float, orders: list[float]) -> None:
    with pytest.raises(ValueError, match="0 < sampling_rate <= 1, noise_multiplier > 0, orders >= 1"):
        fixed_size_gaussian_rdp(q, sigma, np.array(orders))


def test_accountant_epsilon_equals_the_library_accountants() -> None:
    """A DP-DFA run's epsilon (4 690 steps of batch 64 out of 60 000, z = 1.1) through the accountant."""
    accountant = Accountant("replace_one")
    accountant.step(FixedSizeGaussianEvent(60_000, 64, 1.1), count=4_690)
    library = rdp_lib.RdpAccountant(list(accountant.orders), dp_accounting.NeighboringRelation.REPLACE_ONE)
    library.compose(FixedSizeGaussianEvent(60_000, 64, 1.1).library_event(), 4_690)
    ours, theirs = accountant.get_epsilon(1e-5), library.get_epsilon(1e-5)
    assert theirs <= ours <= theirs * (1 + 1e-9)
