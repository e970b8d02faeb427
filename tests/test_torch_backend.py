"""The torch backend: seeded Gaussian matrix, exact software noise, device selection."""

from __future__ import annotations

import math

import pytest
import torch

import opu_hal
from opu_hal import DeviceUnavailable, InputError, TorchProfile
from opu_hal.backends.torch_backend import TorchDevice, gaussian_matrix
from opu_hal.randomness.seeding import stream_seed


def make(**overrides) -> TorchDevice:
    fields = dict(backend="torch", in_features=64, out_features=256, device="cpu", seed=3)
    return opu_hal.load_device(TorchProfile(**{**fields, **overrides}))


def test_matrix_entries_have_std_one_over_sqrt_in_features():
    device = make(in_features=400, out_features=500)
    assert device.matrix.std().item() == pytest.approx(1 / math.sqrt(400), rel=0.01)
    assert device.matrix.mean().item() == pytest.approx(0, abs=0.01 / math.sqrt(400) * 5)


def test_matrix_std_from_the_profile_overrides_the_default():
    assert make(matrix_std=2.0).matrix.std().item() == pytest.approx(2.0, rel=0.02)


def test_same_seed_gives_the_same_matrix_drawn_on_the_cpu():
    expected = gaussian_matrix(64, 256, 1 / 8, stream_seed(3, "matrix")).float()
    assert torch.equal(make().matrix, expected)
    assert torch.equal(make().matrix, make().matrix)
    assert not torch.equal(make(seed=4).matrix, make().matrix)


def test_noiseless_projection_is_the_matrix_product():
    device = make()
    x = torch.randn(5, 64)
    assert torch.allclose(device.project(x).values, x @ device.matrix, atol=1e-6)


def test_software_noise_has_exactly_the_profile_std_and_an_exact_report():
    device = make(noise_std=0.3, in_features=4, out_features=20_000)
    x = torch.zeros(10, 4)
    projection = device.project(x)
    assert projection.noise == opu_hal.NoiseReport(std=0.3, std_lower=0.3, source="software")
    assert projection.values.std().item() == pytest.approx(0.3, rel=0.01)


def test_set_options_noise_std_changes_the_applied_and_reported_noise():
    device = make(noise_std=0.1)
    device.set_options(noise_std=0.0)
    x = torch.randn(2, 64)
    assert device.project(x).noise.std == 0.0
    assert torch.allclose(device.project(x).values, x @ device.matrix, atol=1e-6)
    with pytest.raises(InputError, match=r"noise_std = -1.0 is outside its allowed range \[0.0, inf\]"):
        device.set_options(noise_std=-1.0)
    assert device.noise_report().std == 0.0


def test_set_options_refuses_an_undeclared_option_naming_the_settable_ones():
    device = make(noise_std=0.1)
    with pytest.raises(InputError, match=r"'temperature_c' is not settable.*settable: noise_std in"):
        device.set_options(temperature_c=20.0)


def test_set_noise_std_is_a_deprecated_alias_of_set_options():
    device = make(noise_std=0.1)
    with pytest.warns(DeprecationWarning, match="set_options"):
        device.set_noise_std(0.2)
    assert device.noise_report().std == 0.2


def test_float64_profile_computes_in_float64():
    assert make(dtype="float64").project(torch.randn(1, 64)).values.dtype == torch.float64


def test_binary_input_kind_refuses_real_values():
    device = make(input_kind="binary")
    with pytest.raises(InputError, match="binary-input device"):
        device.project(torch.full((1, 64), 0.5))


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_requested_without_cuda_is_device_unavailable():
    with pytest.raises(DeviceUnavailable, match='device = "auto" or "cpu"'):
        make(device="cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_device_uses_the_same_matrix_as_the_cpu():
    assert torch.equal(make(device="cuda").matrix.cpu(), make().matrix)
