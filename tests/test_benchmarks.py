"""The benchmark scripts run (tiny shapes): a benchmark that cannot run is not a benchmark."""

from benchmarks.simulated_projection import time_shape


def test_simulated_projection_benchmark_reports_ratios():
    result = time_shape(4, 8, 16)
    assert result["linear_ratio"] > 0 and result["intensity_ratio"] > 0
