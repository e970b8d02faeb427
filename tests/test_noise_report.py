"""NoiseReport refuses figures that would let accounting use more noise than applied."""

import pytest

from opu_hal import NoiseReport


def test_lower_bound_above_std_is_refused():
    with pytest.raises(ValueError, match="must not exceed std"):
        NoiseReport(std=0.1, std_lower=0.2, source="declared")


@pytest.mark.parametrize("std", [-0.1, float("nan"), float("inf")])
def test_negative_or_non_finite_std_is_refused(std):
    with pytest.raises(ValueError, match="finite and >= 0"):
        NoiseReport(std=std, std_lower=0.0, source="software")


def test_unknown_source_is_refused():
    with pytest.raises(ValueError, match="noise source"):
        NoiseReport(std=0.1, std_lower=0.1, source="guessed")  # type: ignore[arg-type]


PLAIN = (float, int, str, bool, type(None))


def _plain(value) -> bool:
    if isinstance(value, dict):
        return all(type(k) is str and _plain(v) for k, v in value.items())
    return type(value) in PLAIN


@pytest.mark.parametrize("profile", ["torch-cpu", "opu-sim", "lighton-simulated"])
def test_report_of_every_backend_serializes_to_plain_json_types(profile):
    """Result records and the CLI dump reports with json: numpy/torch scalars must not leak in."""
    import json

    import opu_hal
    from opu_hal.testing import valid_batch

    with opu_hal.load_device(profile) as device:
        report = device.project(valid_batch(device, 3)).noise
    data = report.to_dict()
    assert _plain(data), {k: type(v).__name__ for k, v in data.items()}
    assert json.loads(json.dumps(data)) == data
    assert data["std"] == report.std and data["std_lower"] == report.std_lower
