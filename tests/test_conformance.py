"""The device contract, checked against every profile in device_profiles/.

A new backend is tested by adding its profile file: nothing here names a backend.
"""

from __future__ import annotations

import math

import pytest
import torch
from scipy import stats

import opu_hal
from opu_hal import DeviceUnavailable, InputError, NoiseReport, Projection

from .conftest import open_or_skip, valid_batch

REPEATS = 64  # repeated projections of one input for the empirical noise check
CONFIDENCE = 0.999


def test_every_shipped_profile_validates(profile_path):
    profile = opu_hal.load_profile(profile_path)
    assert profile.backend in opu_hal.backend_names()
    assert profile.in_features >= 1 and profile.out_features >= 1


def test_projection_has_batch_by_out_features_shape(device):
    projection = device.project(valid_batch(device, 5))
    assert isinstance(projection, Projection)
    assert tuple(projection.values.shape) == (5, device.out_features)
    assert projection.values.is_floating_point()
    assert bool(torch.isfinite(projection.values).all())


def test_capabilities_cover_the_configured_size(device):
    caps = device.capabilities
    assert caps.input_kind in ("binary", "ternary", "real")
    assert caps.output_kind in ("linear", "intensity")
    if caps.max_in_features is not None:
        assert device.in_features <= caps.max_in_features
    if caps.max_out_features is not None:
        assert device.out_features <= caps.max_out_features


def test_same_profile_gives_same_projections(profile_path):
    first, second = open_or_skip(profile_path), open_or_skip(profile_path)
    with first, second:
        for step in range(3):
            x = valid_batch(first, 4, seed=step)
            assert torch.equal(first.project(x).values.cpu(), second.project(x).values.cpu())


def test_noise_report_lower_bound_never_exceeds_std(device):
    reports = [device.noise_report(), device.project(valid_batch(device, 3)).noise]
    for report in reports:
        assert isinstance(report, NoiseReport)
        assert 0 <= report.std_lower <= report.std
        assert report.source in ("declared", "calibrated", "software")


def test_declared_noise_std_matches_repeated_projections(device):
    """Pooled variance of repeats of one input lies in the chi-square 99.9% interval of std.

    Shot noise makes coordinates differ in variance; the interval uses Satterthwaite's effective
    degrees of freedom from the per-coordinate sample variances (exact count when they agree).
    """
    x = valid_batch(device, 1, seed=7)
    projections = [device.project(x.expand(REPEATS // 2, -1).clone()) for _ in range(2)]
    values = torch.cat([p.values for p in projections]).double().cpu()
    std = projections[0].noise.std
    assert projections[1].noise.std == pytest.approx(std, rel=1e-6)
    residual = values - values.mean(dim=0, keepdim=True)
    if std == 0:
        assert float(residual.abs().max()) <= 1e-6 * max(1.0, float(values.abs().max()))
        return
    repeats, width = values.shape
    per_coordinate = (residual**2).sum(dim=0) / (repeats - 1)
    dof = (repeats - 1) * float(per_coordinate.sum()) ** 2 / float((per_coordinate**2).sum())
    dof = min(dof, (repeats - 1) * width)
    empirical_var = float(per_coordinate.mean())
    statistic = dof * empirical_var / std**2
    alpha = (1 - CONFIDENCE) / 2
    low, high = stats.chi2.ppf(alpha, dof), stats.chi2.ppf(1 - alpha, dof)
    assert low <= statistic <= high, f"declared std {std:.6g}, empirical {math.sqrt(empirical_var):.6g}"


@pytest.mark.parametrize(
    "make_bad, says",
    [
        pytest.param(lambda d: torch.zeros(d.in_features), "shape", id="rank-1"),
        pytest.param(lambda d: torch.zeros(2, 1, d.in_features), "shape", id="rank-3"),
        pytest.param(lambda d: torch.zeros(2, d.in_features + 1), "got shape", id="too-wide"),
        pytest.param(lambda d: torch.zeros(0, d.in_features), "empty", id="empty"),
        pytest.param(lambda d: torch.full((2, d.in_features), float("nan")), "NaN", id="nan"),
        pytest.param(lambda d: torch.full((2, d.in_features), float("inf")), "inf", id="inf"),
        pytest.param(lambda d: torch.zeros(2, d.in_features, dtype=torch.cfloat), "real", id="complex"),
    ],
)
def test_bad_batch_raises_input_error_and_device_stays_usable(device, make_bad, says):
    with pytest.raises(InputError, match=says):
        device.project(make_bad(device))
    assert device.project(valid_batch(device, 2)).values.shape == (2, device.out_features)


def test_values_outside_the_input_kind_raise_input_error(device):
    kind = device.capabilities.input_kind
    if kind == "real":
        pytest.skip("real-input device accepts every finite value")
    x = valid_batch(device, 2)
    x[0, 0] = 0.5
    with pytest.raises(InputError, match=f"{kind}-input device"):
        device.project(x)
    assert device.project(valid_batch(device, 2)).values.shape == (2, device.out_features)


def test_more_features_than_the_hardware_supports_raise_input_error(device):
    limit = device.capabilities.max_in_features
    if limit is None:
        pytest.skip("no hardware input limit declared")
    with pytest.raises(InputError, match=f"at most {limit}"):
        device.project(torch.zeros(1, limit + 1))


def test_context_manager_closes_the_device(profile_path):
    with open_or_skip(profile_path) as device:
        device.project(valid_batch(device, 1))
        assert not device.closed
    assert device.closed
    with pytest.raises(DeviceUnavailable, match="closed"):
        device.project(valid_batch(device, 1))
