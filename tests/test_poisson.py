"""The exact, device-agnostic Poisson sampler (PTRS and inversion) of the simulated camera."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from opu_hal.kernels.poisson import poisson, poisson_constant, poisson_quantile


def assert_follows_poisson_pmf(draws: np.ndarray, rate: float) -> None:
    """Chi-square of the draws' histogram (within 6 sd) against the Poisson pmf: p > 1e-3."""
    ks = np.arange(max(0, int(rate - 6 * rate**0.5 - 3)), int(rate + 6 * rate**0.5 + 10))
    expected = stats.poisson.pmf(ks, rate) * len(draws)
    observed = np.array([(draws == k).sum() for k in ks])
    keep = expected > 5
    chi2 = ((observed[keep] - expected[keep]) ** 2 / expected[keep]).sum()
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-3


@pytest.mark.parametrize("rate", [0.3, 3.0, 9.99, 10.0, 37.2, 600.0, 1e5])
def test_draws_follow_the_poisson_pmf(rate):
    g = torch.Generator().manual_seed(int(rate * 100))
    draws = poisson(torch.full((200_000,), rate), g).numpy()
    assert_follows_poisson_pmf(draws, rate)
    assert np.all(draws == np.round(draws)) and draws.min() >= 0


def test_mixed_rates_keep_their_places_and_zero_rates_give_zero():
    rates = torch.tensor([[0.0, 2.0, 50.0], [1000.0, 0.0, 9.0]]).repeat(20_000, 1)
    draws = poisson(rates, torch.Generator().manual_seed(0))
    assert draws.shape == rates.shape and draws.dtype == rates.dtype
    assert torch.all(draws[rates == 0] == 0)
    assert torch.allclose(draws.double().mean(0), rates.double().mean(0), rtol=0.02, atol=0.02)


def test_negative_or_nonfinite_rates_are_refused():
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="finite and >= 0"):
            poisson(torch.tensor([1.0, bad]))


def test_a_seeded_generator_replays_the_same_frame():
    rates = torch.linspace(0, 300, 1000)
    assert torch.equal(
        poisson(rates, torch.Generator().manual_seed(4)), poisson(rates, torch.Generator().manual_seed(4))
    )


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: GPU frames are checked on a GPU only")
def test_cuda_frames_are_exact_poisson_on_the_device():
    rate = 600.0
    g = torch.Generator("cuda").manual_seed(0)
    draws = poisson(torch.full((200_000,), rate, device="cuda"), g)
    assert draws.device.type == "cuda"
    assert abs(float(draws.double().mean()) - rate) < 5 * (rate / 200_000) ** 0.5
    assert abs(float(draws.double().var()) / rate - 1) < 0.02


@pytest.mark.parametrize("rate", [0.05, 3.0, 579.0, 2.5e5])
def test_one_rate_by_table_inversion_follows_the_poisson_pmf(rate):
    draws = poisson_constant(rate, 200_000, torch.Generator().manual_seed(3)).double().numpy()
    assert_follows_poisson_pmf(draws, rate)


def test_table_inversion_reaches_the_far_tails():
    """Uniforms in the first and last guide bins still land on their exact quantiles."""
    rate, qs = 579.0, [1e-30, 1e-12, 0.5, 1 - 1e-12]
    draws = poisson_quantile(rate, torch.tensor(qs, dtype=torch.float64))
    assert draws.tolist() == [stats.poisson.ppf(q, rate) for q in qs]


def test_a_flat_field_read_has_the_distribution_of_a_per_pixel_read():
    """Anchor frames by table (``Sensor.read_flat``) against ``Sensor.read`` with DSNU on."""
    import opu_hal
    from opu_hal.backends.simulated.profile import SimulatedProfile

    device = opu_hal.load_device(
        SimulatedProfile(
            backend="simulated",
            in_features=4,
            out_features=2000,
            dsnu_rms=0.5,
            hot_pixel_fraction=0.01,
            gain_e_per_dn=1.0,
            temperature_c=60.0,
            exposure_us=5000.0,
            read_noise_e=0.0,
            compute="cpu",
        )
    )
    sensor, g = device.sensor, torch.Generator().manual_seed(0)
    flat, _ = sensor.read_flat(device.anchor_e, (200, 2000), g, torch.device("cpu"))
    per_pixel, _ = sensor.read(torch.full((200, 2000), device.anchor_e), g)
    a, b = flat.flatten().numpy(), per_pixel.flatten().numpy()
    assert stats.ks_2samp(a, b).pvalue > 1e-3
    hot = device._dark_map > 5
    assert flat[:, hot].var().item() == pytest.approx(per_pixel[:, hot].var().item(), rel=0.1)
