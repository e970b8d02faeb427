"""The benchmark scripts run (tiny shapes): a benchmark that cannot run is not a benchmark."""

from benchmarks.simulated_projection import time_shape


def test_simulated_projection_benchmark_reports_ratios():
    result = time_shape(4, 8, 16)
    assert result["linear_ratio"] > 0 and result["intensity_ratio"] > 0


def test_camera_kernel_benchmark_compares_compiled_and_eager_frames(capsys):
    from benchmarks.camera_kernel import cpu_frames

    cpu_frames()
    printed = capsys.readouterr().out
    assert "speckle frame: compiled" in printed and "anchor frame:  compiled" in printed
