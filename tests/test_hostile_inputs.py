"""Hostile command-line inputs (issue 15): each is a clear error naming the option, never a
traceback, a hang or a silent wrong result (each case was a traceback or a hang before)."""

from __future__ import annotations

import pytest

from opu_hal.cli import main

RUN = ["--dataset-size", "60000", "--batch-size", "256", "--epochs", "15"]


@pytest.mark.parametrize("argv, named", [
    (["account", *RUN, "--noise-multiplier", "1e-300"], "--noise-multiplier must be in"),
    (["account", *RUN, "--noise-multiplier", "nan"], "--noise-multiplier must be in"),
    (["account", *RUN, "--noise-multiplier", "inf"], "--noise-multiplier must be in"),
    (["noise", "opu-sim", "--points", "0"], "--points must be in [1, 1000]"),
    (["noise", "opu-sim", "--points", "-3"], "--points must be in [1, 1000]"),
    (["noise", "opu-sim", "--points", "10000000"], "--points must be in [1, 1000]"),
    (["project", "torch-cpu", "--batch", "-1"], "--batch must be in [1, "),
    (["project", "torch-cpu", "--batch", "100000000000"], "--batch must be in [1, "),
    (["train", "--method", "dfa", "--hidden", "100000000"], "--hidden needs one or more widths in [1, 65536]"),
    (["train", "--method", "dfa", "--hidden", "60000,60000"], "is available; use smaller widths"),
    (["table", "/nonexistent/run.json"], "not a readable result record"),
    (["table", "/dev/null"], "not a readable result record"),
    (["plot", "/nonexistent/run.json", "--out", "curves.png"], "not a readable result record"),
    (["calibrate", "opu-sim", "--out", "/", "--temperatures", "25"], "--out /: not a writable file path"),
])
def test_hostile_argument_is_a_clear_error(argv, named, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err


def test_table_refuses_a_json_file_that_is_no_result_record(tmp_path, capsys):
    (tmp_path / "foreign.json").write_text('{"a": 1}')
    assert main(["table", str(tmp_path / "foreign.json")]) == 2
    assert "not a result record" in capsys.readouterr().err


def test_plot_out_is_checked_before_plotting(tmp_path, capsys):
    assert main(["plot", str(tmp_path / "missing.json"), "--out", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
