"""The lattice Skellam mechanism: its accounting against exact evaluations, and its device sources."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats
from scipy.special import logsumexp

import opu_hal
from opu_hal import DeviceUnavailable
from opu_hal.privacy import Accountant, FixedSizeGaussianEvent
from opu_hal.privacy.events import event_from_dict
from opu_hal.privacy.mechanisms import SkellamRelease
from opu_hal.privacy.skellam import (
    FixedSizeSkellamEvent,
    SkellamEvent,
    SkellamLattice,
    skellam_rdp,
    subsampled_without_replacement_rdp,
)
from opu_hal.profiles.catalogue import validate_profile
from opu_hal.randomness.secure_random import SecureGenerator

ORDERS = np.array([2.0, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64])


def exact_skellam_renyi(poisson_mean: float, shift: int, alpha: float) -> float:
    """D_alpha(Sk(lam) || Sk(lam) + shift) summed over the PMFs (independent of the bound's proof)."""
    sd = math.sqrt(2 * poisson_mean)
    span = int(shift + 40 * sd + 50)
    k = np.arange(-span, span + 1)
    with np.errstate(invalid="ignore"):
        terms = alpha * stats.skellam.logpmf(k, poisson_mean, poisson_mean) + (1 - alpha) * stats.skellam.logpmf(
            k - shift, poisson_mean, poisson_mean
        )
    return float(logsumexp(terms[np.isfinite(terms)]) / (alpha - 1))


@pytest.mark.parametrize("poisson_mean", [50.0, 1000.0])
@pytest.mark.parametrize("shift", [1, 5])
def test_skellam_bound_is_never_below_the_exact_renyi_divergence(poisson_mean, shift):
    bound = skellam_rdp(ORDERS, shift, shift, poisson_mean)
    exact = np.array([exact_skellam_renyi(poisson_mean, shift, a) for a in ORDERS])
    assert np.all(bound >= exact * (1 - 1e-9))


def test_skellam_bound_is_within_one_percent_of_exact_at_a_large_poisson_mean():
    bound = skellam_rdp(ORDERS, 1, 1, 1000.0)
    exact = np.array([exact_skellam_renyi(1000.0, 1, a) for a in ORDERS])
    assert np.all(bound <= exact * 1.01)


def test_epsilon_from_the_bound_agrees_with_epsilon_from_the_exact_divergences_within_one_percent():
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

    orders = np.arange(2, 65, dtype=float)
    bound = 100 * skellam_rdp(orders, 1, 1, 1000.0)
    exact = 100 * np.array([exact_skellam_renyi(1000.0, 1, a) for a in orders])
    eps_bound = rdp_lib.compute_epsilon(orders, bound, 1e-5)[0]
    eps_exact = rdp_lib.compute_epsilon(orders, exact, 1e-5)[0]
    assert eps_exact <= eps_bound <= 1.01 * eps_exact


def test_skellam_curve_is_infinite_at_fractional_orders_the_theorem_does_not_cover():
    curve = skellam_rdp(np.array([1.5, 2.0, 2.5]), 1, 1, 100.0)
    assert math.isinf(curve[0]) and math.isfinite(curve[1]) and math.isinf(curve[2])


@pytest.mark.parametrize("z", [0.7, 1.0, 2.0])
def test_general_subsampling_bound_is_never_below_the_librarys_gaussian_specialisation(z):
    q = 1024 / 60000
    library = FixedSizeGaussianEvent(60000, 1024, z).rdp(ORDERS, "replace_one")
    general = subsampled_without_replacement_rdp(lambda a: a / (2 * z * z), q, ORDERS)
    assert np.all(general >= library * (1 - 1e-9))
    assert general[0] == pytest.approx(library[0], rel=1e-9)  # order 2: the same term


def test_subsampling_bound_never_exceeds_the_unsampled_curve():
    event = FixedSizeSkellamEvent(1000, 1000 // 2, 10.0, 100.0, 50.0)
    unsampled = SkellamEvent(10.0, 100.0, 50.0).rdp(ORDERS, "replace_one")
    assert np.all(event.rdp(ORDERS, "replace_one") <= unsampled)


def test_skellam_events_round_trip_through_the_ledger():
    accountant = Accountant("replace_one")
    accountant.step(FixedSizeSkellamEvent(60000, 1024, 1200.0, 5e5, 3e6), 3)
    restored = Accountant.from_json(accountant.to_json())
    assert restored.get_epsilon(1e-5) == accountant.get_epsilon(1e-5)
    assert event_from_dict(SkellamEvent(2.0, 3.0, 4.0).to_dict()) == SkellamEvent(2.0, 3.0, 4.0)


def test_lattice_noise_std_is_the_gaussian_equivalent_times_the_resolution_factor():
    lattice = SkellamLattice(dimension=10_000, sensitivity=0.01, resolution=10.0)
    z = 1.3
    assert lattice.noise_std(lattice.poisson_mean(z)) == pytest.approx(z * 0.01 * 11 / 10)


def test_coupled_roundings_of_neighbours_stay_within_the_stated_sensitivities():
    generator = SecureGenerator()
    lattice = SkellamLattice(dimension=4096, sensitivity=1.0, resolution=3.0)
    rng = np.random.default_rng(1)
    for _ in range(20):
        x = rng.normal(size=4096) * 50
        v = rng.normal(size=4096)
        x2 = x + v / np.linalg.norm(v) * lattice.gamma  # ||x - x'|| = gamma * Delta
        u = generator.uniform(4096)
        d = (np.floor(x) + (u < x - np.floor(x))) - (np.floor(x2) + (u < x2 - np.floor(x2)))
        assert np.linalg.norm(d) <= lattice.l2_sensitivity
        assert np.abs(d).sum() <= lattice.l1_sensitivity


def test_release_noise_has_the_std_the_lattice_promises():
    device = opu_hal.load_device("torch-cpu")
    lattice = SkellamLattice(dimension=50_000, sensitivity=0.5, resolution=10.0)
    release = SkellamRelease(device, lattice, lattice.poisson_mean(1.0))
    noisy = release.release(torch.full((50_000,), 0.3))
    assert float(noisy.mean()) == pytest.approx(0.3, abs=5 * release.noise_std / math.sqrt(50_000))
    assert float(noisy.std()) == pytest.approx(release.noise_std, rel=0.02)


def test_simulated_privacy_profile_serves_skellam_counts_of_at_least_the_requested_mean():
    device = opu_hal.load_device("opu-sim-dp")
    assert device.capabilities.privacy_noise
    draw = device.draw_privacy_counts(200_000, 3e5)
    assert draw.counts.dtype == torch.int64
    assert draw.distribution.poisson_mean_lower >= 3e5
    assert draw.distribution.poisson_mean >= draw.distribution.poisson_mean_lower
    # Var = 2 * mean (Skellam) plus the read noise of the summed reads.
    reads = draw.distribution.reads_per_value
    expected = 2 * draw.distribution.poisson_mean + 2 * reads * (6.0**2 + 1 / 12)
    assert float(draw.counts.double().var()) == pytest.approx(expected, rel=0.02)


def _simulated(**changes):
    data = {
        "backend": "simulated",
        "in_features": 10,
        "out_features": 64,
        "gain_e_per_dn": 1.0,
        "adc_bits": 12,
        "black_level_dn": 64,
        "anchor_power_uw": 2.0,
    }
    data.update(changes)
    return opu_hal.load_device(validate_profile(data, "probe.toml"))


@pytest.mark.parametrize(
    "changes, key",
    [
        ({"gain_e_per_dn": 20.0}, "gain_e_per_dn"),
        ({"anchor_power_uw": 20.0}, "anchor_power_uw"),
        ({"full_well_e": 600.0}, "full_well_e"),
    ],
)
def test_simulated_device_refuses_operating_points_where_the_analysis_fails(changes, key):
    device = _simulated(**changes)
    assert not device.capabilities.privacy_noise
    with pytest.raises(DeviceUnavailable, match=key):
        device.draw_privacy_counts(10, 1e4)


def test_default_8bit_profile_is_refused_as_privacy_source_naming_the_gain():
    device = opu_hal.load_device("opu-sim")
    with pytest.raises(DeviceUnavailable, match="gain_e_per_dn"):
        SkellamRelease(device, SkellamLattice(10, 1.0), 100.0)


def test_lighton_simulated_device_cannot_serve_privacy_noise():
    device = opu_hal.load_device("lighton-simulated")
    assert not device.capabilities.privacy_noise
    with pytest.raises(DeviceUnavailable, match="privacy-noise source"):
        device.draw_privacy_counts(4, 10.0)
