"""The benchmark scripts run (tiny shapes): a benchmark that cannot run is not a benchmark."""

import re
from pathlib import Path

from benchmarks.simulated_projection import time_shape

ROOT = Path(__file__).resolve().parent.parent


def test_simulated_projection_benchmark_reports_ratios():
    result = time_shape(4, 8, 16)
    assert result["linear_ratio"] > 0 and result["intensity_ratio"] > 0


def test_camera_kernel_benchmark_compares_compiled_and_eager_frames(capsys):
    from benchmarks.camera_kernel import cpu_frames

    cpu_frames()
    printed = capsys.readouterr().out
    assert "speckle frame: compiled" in printed and "anchor frame:  compiled" in printed


def test_private_vs_opacus_goal_lines_judge_the_median_ratios():
    from benchmarks.interleave import Ratio
    from benchmarks.private_vs_opacus import DFA, SGD, goal_lines

    summary = {SGD: Ratio(1.15, 1.1, 1.3, 2.0), DFA: Ratio(1.7, 1.6, 1.9, 3.0)}
    lines = goal_lines(summary, Ratio(0.75, 0.7, 0.8, 2.0)).splitlines()
    assert lines[0].endswith("1.15x [1.10-1.30] plain (goal <= 1.2x): met")
    assert lines[1].endswith("= 0.75x [0.70-0.80] (goal < 1): met")
    assert lines[2].endswith("1.70x [1.60-1.90] plain (goal <= 1.2x): NOT met")
    assert goal_lines(summary, Ratio(1.05, 0.9, 1.2, 2.0)).splitlines()[1].endswith("NOT met")
    assert len(lines) == 3  # no device row, no device goal


def test_private_vs_opacus_judges_the_device_noise_row_at_1_3x():
    from benchmarks.interleave import Ratio
    from benchmarks.private_vs_opacus import DEVICE, DFA, SGD, goal_lines

    summary = {SGD: Ratio(1.15, 1.1, 1.3, 2.0), DFA: Ratio(1.1, 1.0, 1.2, 2.0), DEVICE: Ratio(1.25, 1.2, 1.4, 2.5)}
    assert goal_lines(summary, Ratio(0.7, 0.6, 0.8, 2.0)).splitlines()[3].endswith("(goal <= 1.3x): met")
    summary[DEVICE] = Ratio(6.5, 6.0, 7.0, 13.0)
    assert goal_lines(summary, Ratio(0.7, 0.6, 0.8, 2.0)).splitlines()[3].endswith("(goal <= 1.3x): NOT met")


def test_interleaved_rounds_time_the_baseline_first_and_rotate_the_rows():
    from benchmarks.interleave import interleaved_times, ratios

    calls: list[str] = []
    seconds = {"base": iter([1.0, 2.0, 1.0]), "a": iter([1.5, 3.0, 1.2]), "b": iter([2.0, 2.0, 2.0])}

    def row(name):
        return lambda: calls.append(name) or next(seconds[name])

    times = interleaved_times({name: row(name) for name in seconds}, 3, "base")
    assert calls == ["base", "a", "b", "base", "b", "a", "base", "a", "b"]
    summary = ratios(times, "base")
    assert (summary["a"].median, summary["a"].low, summary["a"].high) == (1.5, 1.2, 1.5)  # a slow round moves one ratio
    assert summary["b"].median == 2.0 and summary["b"].low == 1.0 and summary["base"].median == 1.0


def test_private_step_cpu_benchmark_times_plain_and_private_steps(monkeypatch):
    from benchmarks import private_step_cpu
    from benchmarks.data import fashion_or_random

    monkeypatch.setattr(private_step_cpu, "METHODS", ("dp-sgd",))
    line = private_step_cpu.round_line(fashion_or_random(256 * 4))
    assert line.startswith("CPU ms/step, 1 thread: plain ") and "dp-sgd " in line and "x)" in line


def test_api_parity_goal_lines_judge_this_runs_ratio_epsilons_and_accuracies():
    from benchmarks.api_parity import goal_lines

    lines = goal_lines(1.02, 7.9994, 7.9994, 0.851, 0.853).splitlines()
    assert lines[0].endswith("1.020x (goal <= 1.05x): met")
    assert lines[1].endswith(": met") and lines[2].endswith("0.20 points apart (goal <= 0.5): met")
    lines = goal_lines(1.10, 7.9, 8.0, 0.80, 0.85).splitlines()
    assert all(line.endswith("NOT met") for line in lines)


def test_opacus_cnn_row_is_opacus_convnet_with_groupnorm_that_dp_sgd_accepts():
    import torch
    from torch import nn

    from benchmarks.opacus_cnn import convnet
    from trainers.api import ModuleValidator

    model = convnet()
    assert model(torch.zeros(2, 1, 28, 28)).shape == (2, 10)
    assert [m.out_channels for m in model if isinstance(m, nn.Conv2d)] == [32, 64, 64, 128]
    assert sum(isinstance(m, nn.GroupNorm) for m in model) == 4 and ModuleValidator.is_valid(model)


def test_opacus_cnn_report_states_the_accuracy_gap_and_the_wall_time_ratio():
    from benchmarks.opacus_cnn import report

    side = {"wrap_s": 1.0, "z": 1.1, "epsilon": 2.99}
    results = {
        "ours": {**side, "epoch_s": [10.0, 11.0], "accuracy": 0.700},
        "opacus": {**side, "epoch_s": [12.0, 12.0], "accuracy": 0.715},
    }
    lines = report(results).splitlines()
    assert lines[-2] == "accuracy ours - Opacus: -1.50 points (goal: at most 1.0 below): NOT met"
    assert lines[-1] == "wall time ours / Opacus: 0.880x (goal <= 1): met"


def test_cli_speed_benchmark_times_a_command_of_this_checkout():
    from benchmarks.cli_speed import ROOT, seconds

    assert 0 < seconds(["--version"], ROOT) < 60


def test_planning_speed_benchmark_times_a_kappa_curve():
    from benchmarks.planning_speed import kappa_seconds

    assert kappa_seconds(20.0) > 0


def test_opacus_cnn_summary_gives_mean_and_sd_accuracy_and_the_median_wall_ratio_over_repeats():
    from benchmarks.opacus_cnn import summary

    def repeat(ours: float, theirs: float, wall_ours: float) -> dict:
        return {"ours": {"accuracy": ours, "wall_s": wall_ours}, "opacus": {"accuracy": theirs, "wall_s": 100.0}}

    lines = summary([repeat(0.61, 0.64, 90.0), repeat(0.63, 0.62, 120.0), repeat(0.65, 0.60, 95.0)]).splitlines()
    assert lines[0] == "over 3 repeats: test accuracy ours 63.00 +- 2.00 %, Opacus 62.00 +- 2.00 % (mean +- sd)"
    assert lines[2] == (
        "mean accuracy ours - Opacus: +1.00 points (goal: at most 1.0 below): met (standard error of the gap 1.63 points)"
    )
    assert lines[3] == "wall time ours / Opacus: median 0.950x over repeats [0.900-1.200] (goal <= 1): met"
    lines = summary([repeat(0.60, 0.62, 110.0), repeat(0.61, 0.63, 105.0)]).splitlines()
    assert lines[2].endswith("-2.00 points (goal: at most 1.0 below): NOT met (standard error of the gap 0.71 points)")
    assert lines[3].endswith("NOT met")


def test_planning_speed_times_the_plan_the_main_job_runs():
    from benchmarks.planning_speed import MAIN_PLAN

    main_job = (ROOT / "scripts" / "main.sh").read_text()
    plan = " ".join(MAIN_PLAN)

    def value(flag: str, text: str) -> str:
        found = re.search(rf"{flag} (\S+)", text)
        assert found is not None, flag
        return found.group(1)

    for flag in ("--lattice-resolution", "--sampling", "--batch-size"):
        assert value(flag, plan) == value(flag, main_job)
    assert value("--dataset-size", plan) == value("--public-dataset-size", main_job)
    assert "--mechanism digitized" in plan  # the main job's calibration does not prove unity gain


def test_planning_speed_judges_the_main_plan_against_ten_seconds(monkeypatch, capsys, tmp_path):
    import benchmarks.planning_speed as bench

    for seconds, verdict in ((8.0, "met"), (12.5, "NOT met")):
        monkeypatch.setattr(bench, "main_plan_seconds", lambda calibration, s=seconds: (s, "  1 reads per count"))
        bench.time_main_plan(tmp_path / "cal.json")
        assert f"(goal <= 10 s: {verdict})" in capsys.readouterr().out


def test_secure_normals_benchmark_times_ours_against_randomgen_in_one_run(monkeypatch, capsys):
    import sys

    from benchmarks import secure_normals

    monkeypatch.setattr(sys, "argv", ["secure_normals", "--n", "5000", "--repeats", "2"])
    secure_normals.main()
    printed = capsys.readouterr().out
    assert printed.count("x randomgen") == 6 and "2 Numba thread(s)" in printed
    assert "randomgen ChaCha20, numpy ziggurat, one stream" in printed and " 1.00x randomgen" in printed


def test_noise_draws_benchmark_times_every_draw_against_numpy():
    from benchmarks.noise_draws import rows

    timed = rows(1)
    assert [row[0].split()[1] for row in timed[:3]] == ["normals,", "normals,", "Poisson"] and len(timed) == 6
    assert "prefixes" in timed[4][0] and "whole uniforms" in timed[5][0]
    assert all(best > 0 and median >= best and numpy > 0 for _, best, median, numpy in timed)


def test_noise_draws_times_the_first_round_against_the_two_pass_path():
    from benchmarks.noise_draws import first_round_against_two_pass

    two_pass, first = first_round_against_two_pass(1)
    assert two_pass > 0 and first > 0


def test_dp_sgd_overheads_rows_run_with_their_part_taken_out_and_normals_parts_add_up():
    from benchmarks.data import fashion_or_random
    from benchmarks.dp_sgd_overheads import NO_BUDGET, NO_NORMALS, WHOLE, epoch_rows, normals_parts

    rows = epoch_rows(fashion_or_random(512), 8.0)
    assert all(rows[name]() > 0 for name in (NO_NORMALS, NO_BUDGET, WHOLE))  # the patched names still exist
    parts = normals_parts(repeats=2)
    assert parts["total"] > 0
    assert abs(sum(v for k, v in parts.items() if k != "total") - parts["total"]) < 1e-12


def test_gpu_training_ablations_patch_what_they_name():
    """Each ablation's patch enters (its target exists), and the whole-uniforms one gives a private run's
    sampler the stream of before the prefixes."""
    from benchmarks.gpu_training import ABLATIONS
    from trainers.core.sampling import COMPILED_STREAM, PREFIX_STREAM
    from trainers.distributed.context import SingleProcess
    from trainers.distributed.setup import shared_stream

    for _, patch in ABLATIONS.values():
        with patch():
            pass
    with ABLATIONS["dp-sgd whole-uniforms"][1]():
        assert shared_stream(SingleProcess()) == COMPILED_STREAM
    assert shared_stream(SingleProcess()) == PREFIX_STREAM


def test_cnn_epoch_times_each_row_on_the_loops_cnn():
    from benchmarks.cnn_epoch import ROWS, epoch_seconds
    from benchmarks.data import fashion_or_random

    data = fashion_or_random(512)
    assert all(epoch_seconds(method, data, (4,), 8.0) > 0 for method in ROWS)
