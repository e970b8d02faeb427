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


def test_report_serializes_to_plain_json_types():
    report = NoiseReport(std=0.2, std_lower=0.15, source="calibrated", temperature_c=30.0)
    assert report.to_dict()["temperature_c"] == 30.0 and report.to_dict()["source"] == "calibrated"
