"""The simulated OPU: optics, camera physics, temperature, and its declared noise."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from scipy import stats

import opu_hal
from opu_hal import InputError, ProfileError, SimulatedProfile
from opu_hal.backends.simulated.device import SaturationWarning, SimulatedDevice
from opu_hal.backends.simulated.optics import TransmissionMatrix
from opu_hal.camera.physics import band_gap_ev, dark_current_rate

ELECTRON_CHARGE_C = 1.602176634e-19


def make(**overrides) -> SimulatedDevice:
    """A small simulated OPU on the CPU (the CUDA tests ask for ``compute="cuda"``)."""
    fields = dict(backend="simulated", in_features=16, out_features=512, seed=5, compute="cpu")
    return opu_hal.load_device(SimulatedProfile(**{**fields, **overrides}))


def binary(n: int, width: int, seed: int = 0, p: float = 0.5) -> torch.Tensor:
    return (torch.rand(n, width, generator=torch.Generator().manual_seed(seed)) < p).float()


def repeats(device: SimulatedDevice, x: torch.Tensor, n: int) -> torch.Tensor:
    return device.project(x.expand(n, -1).clone()).values.double()


# -- camera physics ------------------------------------------------------------------------------
def test_band_gap_follows_varshni_for_silicon():
    assert band_gap_ev(0.0) == pytest.approx(1.1557)
    assert band_gap_ev(300.0) == pytest.approx(1.1557 - 7.021e-4 * 300**2 / 1408)


def test_dark_current_at_300k_equals_the_figure_of_merit_times_pixel_area():
    area_cm2, fom_na = (5.5e-4) ** 2, 0.5
    expected = fom_na * 1e-9 * area_cm2 / ELECTRON_CHARGE_C  # e-/s at 300 K, by definition of D_FM
    assert dark_current_rate(300.0 - 273.15, area_cm2, fom_na) == pytest.approx(expected, rel=0.01)


def test_dark_current_doubles_every_few_kelvin_near_room_temperature():
    rate = lambda c: dark_current_rate(c, 3e-7, 1.0)  # noqa: E731
    doubling = 10 * math.log(2) / math.log(rate(35.0) / rate(25.0))
    assert 5.0 < doubling < 12.0


# -- optics --------------------------------------------------------------------------------------
def test_linear_mode_matrix_is_real_gaussian_with_variance_one_over_in_features():
    device = make(in_features=64, out_features=4096)
    matrix = device.ideal(torch.eye(64)).flatten().double()
    assert matrix.mean().item() == pytest.approx(0.0, abs=5 / math.sqrt(matrix.numel() * 64))
    assert matrix.var().item() == pytest.approx(1 / 64, rel=0.03)
    assert stats.kurtosis(matrix.numpy(), fisher=False) == pytest.approx(3.0, abs=0.1)


def test_matrix_does_not_depend_on_block_size_or_cache():
    x = binary(3, 300)
    small = make(in_features=300, out_features=5000, block_mb=0.1, cache_mb=0.0)
    large = make(in_features=300, out_features=5000, block_mb=64.0, cache_mb=512.0)
    assert small.optics.n_blocks > 1 and large.optics.n_blocks == 1
    assert torch.allclose(small.ideal(x), large.ideal(x), atol=1e-5)


def test_a_matrix_larger_than_the_cache_is_streamed_without_thrashing():
    """Each projection generates every block exactly once and caches nothing (issue 16: a partial
    LRU cache regenerated 1924 tiles for 962 distinct and doubled the peak memory)."""
    optics = TransmissionMatrix(1000, 20_000, seed=0, block_bytes=8 << 20, cache_bytes=40 << 20)
    optics.field(torch.ones(1, 1000))
    optics.field(torch.ones(1, 1000))
    assert optics.n_blocks == 20 and optics.blocks_generated == 2 * optics.n_blocks
    assert optics.cached_bytes == 0 and not optics.cache_whole


def test_a_matrix_that_fits_is_generated_once_and_kept():
    optics = TransmissionMatrix(1000, 20_000, seed=0, block_bytes=8 << 20, cache_bytes=200 << 20)
    first = optics.field(torch.ones(2, 1000))
    second = optics.field(torch.ones(2, 1000))
    assert optics.blocks_generated == optics.n_blocks == 20 and optics.cached_bytes == 1000 * 20_000 * 8
    assert torch.equal(first[0], second[0])


def test_any_column_block_is_a_slice_of_one_counter_based_stream():
    """Column k's entries are stream elements 2 (k n_in + j) and 2 (k n_in + j) + 1: a block is
    the same whatever the blocking, and equals the stream read directly."""
    from opu_hal.randomness.counter_random import gaussian

    optics = TransmissionMatrix(7, 50, seed=11, block_bytes=7 * 8 * 6, cache_bytes=0)
    real, imag = optics.block(3)
    start, stop = optics.block_range(3)
    stream = gaussian(11, 2 * 7 * start, 2 * 7 * (stop - start)).view(stop - start, 7, 2) * 0.5**0.5
    assert torch.equal(real, stream[:, :, 0].T) and torch.equal(imag, stream[:, :, 1].T)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the GPU matrix is compared on a GPU only")
def test_cuda_generates_the_same_matrix_as_the_cpu():
    cpu = TransmissionMatrix(300, 5000, seed=3, block_bytes=1 << 20, cache_bytes=0)
    gpu = TransmissionMatrix(300, 5000, seed=3, block_bytes=1 << 20, cache_bytes=0, device="cuda")
    for index in range(cpu.n_blocks):
        assert torch.allclose(cpu.block(index)[0], gpu.block(index)[0].cpu(), rtol=1e-5, atol=1e-6)


def test_intensity_mode_returns_the_squared_modulus_on_average():
    device = make(mode="intensity", in_features=32, out_features=256)
    x = binary(1, 32, seed=1)
    ideal = device.ideal(x)[0].double()
    assert torch.allclose(
        device.optics.field(x)[0] ** 2 + device.optics.field(x)[1] ** 2, ideal.float() * 32, rtol=1e-4, atol=1e-4
    )
    mean = repeats(device, x, 400).mean(dim=0)
    standard_error = device.project(x).noise.std / math.sqrt(400)
    assert (mean - ideal).abs().max().item() < 5 * standard_error


def test_linear_values_are_unbiased_estimates_of_x_b():
    device = make()
    x = binary(1, 16, seed=2)
    values = repeats(device, x, 1000)
    z = (values.mean(dim=0) - device.ideal(x)[0]) / (values.std(dim=0) / math.sqrt(1000))
    assert abs(z.mean().item()) < 4 / math.sqrt(z.numel())  # no common bias
    assert z.abs().max().item() < 5.0


# -- temperature and the noise report ------------------------------------------------------------
def test_noise_std_increases_with_temperature_at_long_exposure():
    device = opu_hal.load_device("opu-sim-privacy")
    x = binary(1, device.in_features, seed=3)
    declared, empirical = [], []
    for celsius in (0.0, 40.0, 60.0, 80.0):
        device.set_options(temperature_c=celsius)
        values = repeats(device, x, 200)
        declared.append(device.noise_report().std)
        empirical.append(values.std(dim=0).pow(2).mean().sqrt().item())
    assert declared == sorted(declared) and declared[-1] > 2 * declared[0]
    assert empirical == sorted(empirical) and empirical[-1] > 2 * empirical[0]


def test_temperature_outside_the_sensor_range_is_refused_and_device_stays_usable():
    device = make(temperature_min_c=0.0, temperature_max_c=50.0)
    with pytest.raises(InputError, match=r"temperature_c = 60.0 is outside its allowed range \[0.0, 50.0\]"):
        device.set_options(temperature_c=60.0)
    assert device.capabilities.settable["temperature_c"][:2] == (0.0, 50.0)
    assert device.temperature_c == 25.0
    assert device.project(binary(1, 16)).noise.temperature_c == 25.0


def test_profile_temperature_outside_its_own_range_is_a_profile_error():
    with pytest.raises(ProfileError, match="temperature_c = 90.0 is outside"):
        opu_hal.validate_profile(
            {
                "backend": "simulated",
                "in_features": 4,
                "out_features": 4,
                "temperature_c": 90.0,
                "temperature_max_c": 85.0,
            }
        )


def test_std_lower_bounds_every_coordinate_variance():
    device = make(in_features=16, out_features=1024)
    for seed in range(3):
        x = binary(1, 16, seed=seed, p=0.2 + 0.3 * seed)
        variance = repeats(device, x, 400).var(dim=0)
        low = device.noise_report().std_lower ** 2 * stats.chi2.ppf(1e-6, 399) / 399
        assert variance.min().item() >= low


def test_report_tracks_the_operating_point():
    device = opu_hal.load_device("opu-sim-privacy")
    device.set_options(temperature_c=70.0)
    report = device.project(binary(2, device.in_features)).noise
    assert report.temperature_c == 70.0 and report.exposure_us == 1_000_000.0
    assert report.source == "declared" and report.details["dark_e"] > 1000


def test_saturation_warns_and_is_counted():
    device = make(laser_power_uw=50.0)
    with pytest.warns(SaturationWarning, match="clipped"):
        device.project(torch.ones(2, 16))
    assert device.saturated_pixels > 0


def test_default_profiles_do_not_saturate_on_dense_inputs():
    for name in ("opu-sim", "opu-sim-privacy"):
        device = opu_hal.load_device(name)
        if name == "opu-sim-privacy":
            device.set_options(temperature_c=device.profile.temperature_max_c)
        with warnings.catch_warnings():
            warnings.simplefilter("error", SaturationWarning)
            device.project(binary(256, device.in_features, p=0.5))


# -- ternary helper ------------------------------------------------------------------------------
def test_ternary_projection_is_two_binary_passes_with_combined_noise():
    device = make(in_features=16, out_features=512)
    e = torch.randint(-1, 2, (1, 16), generator=torch.Generator().manual_seed(4)).float()
    projection = opu_hal.project_ternary(device, e.expand(600, -1).clone())
    assert projection.noise.passes == 2
    single = device.noise_report()
    assert projection.noise.std_lower == pytest.approx(math.sqrt(2) * single.std_lower)
    expected = device.ideal((e > 0).float()) - device.ideal((e < 0).float())
    values = projection.values.double()
    standard_error = values.std(dim=0) / math.sqrt(600)  # each pixel's own: a speckle reference's differ
    assert ((values.mean(dim=0) - expected[0]).abs() / standard_error).max().item() < 5.5
    empirical = values.var(dim=0).mean().sqrt().item()
    assert empirical == pytest.approx(projection.noise.std, rel=0.03)


def test_ternary_projection_on_a_real_input_device_is_one_pass():
    device = opu_hal.load_device("torch-cpu")
    projection = opu_hal.project_ternary(device, torch.tensor([[1.0, -1.0] + [0.0] * 8]))
    assert projection.noise.passes == 1


def test_ternary_projection_refuses_non_ternary_values_and_intensity_devices():
    with pytest.raises(InputError, match="ternary"):
        opu_hal.project_ternary(make(), torch.full((1, 16), 0.5))
    with pytest.raises(InputError, match="linear-output"):
        opu_hal.project_ternary(make(mode="intensity"), torch.zeros(1, 16))


def test_capabilities_report_where_the_simulation_computes():
    assert make(compute="cpu").capabilities.compute_device == "cpu"
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert make(compute="auto").capabilities.compute_device == expected


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a host without CUDA")
def test_compute_cuda_without_cuda_is_a_clear_error():
    from opu_hal.contract.errors import DeviceUnavailable

    with pytest.raises(DeviceUnavailable, match='compute = "cuda" but torch sees no CUDA device'):
        make(compute="cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the GPU simulation runs on a GPU only")
def test_the_simulation_on_cuda_projects_the_same_signal_as_on_the_cpu():
    x = binary(64, 32, seed=2)
    cpu, gpu = make(in_features=32, out_features=256), make(in_features=32, out_features=256, compute="cuda")
    assert torch.allclose(cpu.ideal(x), gpu.ideal(x).cpu(), atol=1e-4)
    values = gpu.project(x).values
    assert values.device.type == "cuda" and torch.isfinite(values).all()
    assert (values.cpu() - cpu.ideal(x)).std() < 3 * gpu.noise_report().std
