"""Issue 32 (reliability, round 3): hostile inputs give a clear error naming the file, key or
option and the allowed range (exit 2), or a correct result; never a traceback or a silent wrong one."""

from __future__ import annotations

import resource

import pytest

from opu_hal import memory


def test_available_memory_honours_the_address_space_limit(monkeypatch):
    used = memory._status_bytes("VmSize") or 0
    monkeypatch.setattr(memory.resource, "getrlimit", lambda which: (used + 2**30, resource.RLIM_INFINITY))
    assert memory.address_space_headroom() <= 2**30
    assert memory.available_bytes() <= 2**30


def test_available_memory_honours_a_cgroup_v2_limit(tmp_path, monkeypatch):
    (tmp_path / "job").mkdir()
    (tmp_path / "job/memory.max").write_text(f"{3 * 2**30}\n")
    (tmp_path / "job/memory.current").write_text(f"{2**30}\n")
    membership = tmp_path / "cgroup"
    membership.write_text("0::/job\n")
    assert memory.cgroup_headroom(tmp_path, membership) == 2 * 2**30
    (tmp_path / "job/memory.max").write_text("max\n")
    assert memory.cgroup_headroom(tmp_path, membership) is None
    monkeypatch.setattr(memory, "cgroup_headroom", lambda: 12345)
    assert memory.available_bytes() == 12345


from trainers.cli import main  # noqa: E402  (opu-hal's parser with the trainers' commands)

PLAN = ["plan", "--dataset-size", "54000", "--batch-size", "256", "--epochs", "5", "--target-epsilon", "8",
        "--sensitivity", "1"]


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.err


@pytest.mark.parametrize("extra, named", [
    (["--temperatures", "25", "25"], "--temperatures must be distinct values"),
    (["--temperatures", "25", "--exposures", "400", "400"], "--exposures must be distinct values"),
    (["--temperatures", "25", "--frames", "1000000000"], "--frames must be in [2, "),
    (["--temperatures", "25", "--frames", "1"], "--frames must be in [2, "),
    (["--temperatures", "25", "--plot", "{tmp}/p.xyz"], "--plot {tmp}/p.xyz: the extension .xyz is not a plot format"),
    (["--temperatures", "25", "--plot", "{tmp}/c.json"], "is the --out path"),
    (["--temperatures", "25", "--plot", "/proc/nope/p.png"], "--plot /proc/nope/p.png: not a writable file path"),
])
def test_calibrate_refuses_bad_options_before_measuring(extra, named, tmp_path, capsys):
    argv = ["calibrate", "opu-sim-dp", "--out", f"{tmp_path}/c.json", "--quiet",
            *[a.format(tmp=tmp_path) for a in extra]]
    code, err = run_cli(argv, capsys)
    assert code == 2 and named.format(tmp=tmp_path) in err
    assert not (tmp_path / "c.json").exists()


def test_calibrate_refuses_an_out_path_in_proc_before_measuring(capsys):
    code, err = run_cli(["calibrate", "opu-sim-dp", "--out", "/proc/nope/c.json", "--temperatures", "25"], capsys)
    assert code == 2 and "--out /proc/nope/c.json: not a writable file path" in err


def test_calibrate_out_png_would_be_overwritten_by_its_plot_and_is_refused(tmp_path, capsys):
    code, err = run_cli(["calibrate", "opu-sim-dp", "--out", f"{tmp_path}/cal.png", "--temperatures", "25"], capsys)
    assert code == 2 and "the plot would overwrite the calibration" in err


@pytest.mark.parametrize("profile", ["torch-cpu", "torch-auto", "lighton-simulated"])
def test_calibrate_refuses_a_profile_without_a_camera(profile, tmp_path, capsys):
    code, err = run_cli(["calibrate", profile, "--out", f"{tmp_path}/c.json", "--temperatures", "25"], capsys)
    assert code == 2 and f"profile {profile!r}" in err and "has no camera to calibrate" in err


def test_calibrate_a_profile_whose_temperature_range_is_one_point(tmp_path, capsys):
    profile = tmp_path / "point.toml"
    profile.write_text('backend = "simulated"\nin_features = 4\nout_features = 64\ngain_e_per_dn = 1.0\n'
                       'adc_bits = 12\nanchor_power_uw = 2.0\ntemperature_min_c = 25.0\ntemperature_max_c = 25.0\n')
    code, err = run_cli(["calibrate", str(profile), "--out", f"{tmp_path}/c.json", "--frames", "4", "--quiet"], capsys)
    assert code == 0, err
    from opu_hal.calibration.schema import read_calibration

    assert read_calibration(tmp_path / "c.json").temperatures_c == [25.0]


@pytest.mark.parametrize("extra, named", [
    (["--confidence", "-0.5"], "--confidence must be in (0, 1)"),
    (["--confidence", "0"], "--confidence must be in (0, 1)"),
    (["--confidence", "1"], "--confidence must be in (0, 1)"),
    (["--confidence", "nan"], "--confidence must be in (0, 1)"),
    (["--plot", "/proc/nope/p.png"], "--plot /proc/nope/p.png: /proc is not a writable folder"),
    (["--plot", "p.xyz"], "--plot p.xyz: the extension .xyz is not a plot format"),
])
def test_audit_refuses_bad_confidence_and_plot_before_training(extra, named, capsys, monkeypatch):
    from trainers import audit

    monkeypatch.setattr(audit, "audit_white_box", lambda *a, **k: pytest.fail("the audit ran"))
    code, err = run_cli(["audit", "--method", "dp-dfa", "--target-epsilon", "8", *extra], capsys)
    assert code == 2 and named in err


def test_train_out_in_proc_is_refused_before_training():
    from trainers.errors import TrainingConfigError
    from trainers.loop import check_output_path

    with pytest.raises(TrainingConfigError, match=r"--out /proc/nope/r.json: /proc is not a writable folder"):
        check_output_path("/proc/nope/r.json", "--out")
    check_output_path("relative-name.json", "--out")  # the working folder: writable
