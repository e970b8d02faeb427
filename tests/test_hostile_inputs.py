"""Hostile command-line inputs (issue 15): each is a clear error naming the option, never a
traceback, a hang or a silent wrong result (each case was a traceback or a hang before)."""

from __future__ import annotations

import pytest
import torch

from opu_hal.cli import main

RUN = ["--dataset-size", "60000", "--batch-size", "256", "--epochs", "15"]


@pytest.mark.parametrize(
    "argv, named",
    [
        (["account", *RUN, "--noise-multiplier", "1e-300"], "--noise-multiplier must be in"),
        (["account", *RUN, "--noise-multiplier", "nan"], "--noise-multiplier must be in"),
        (["account", *RUN, "--noise-multiplier", "inf"], "--noise-multiplier must be in"),
        (["plan", *RUN, "--target-epsilon", "8", "--sensitivity", "inf"], "sensitivity must be finite and > 0"),
        (["noise", "opu-sim", "--points", "0"], "--points must be in [1, 1000]"),
        (["noise", "opu-sim", "--points", "-3"], "--points must be in [1, 1000]"),
        (["noise", "opu-sim", "--points", "10000000"], "--points must be in [1, 1000]"),
        (["project", "torch-cpu", "--batch", "-1"], "--batch must be in [1, "),
        (["project", "torch-cpu", "--batch", "100000000000"], "--batch must be in [1, "),
        (["train", "--method", "dfa", "--hidden", "100000000"], "--hidden needs one or more widths in [1, 65536]"),
        (["train", "--method", "dfa", "--hidden", "60000,60000,60000,60000"], "is available; use smaller widths"),
        (["table", "/nonexistent/run.json"], "not a readable result record"),
        (["table", "/dev/null"], "not a readable result record"),
        (["plot", "/nonexistent/run.json", "--out", "curves.png"], "not a readable result record"),
        (["calibrate", "opu-sim", "--out", "/", "--temperatures", "25"], "--out /: not a writable file path"),
    ],
)
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


import opu_hal  # noqa: E402
from opu_hal.contract.errors import ProfileError  # noqa: E402

SIM = {"backend": "simulated", "in_features": 8, "out_features": 64}
TORCH = {"backend": "torch", "in_features": 8, "out_features": 64, "device": "cpu"}
LIGHTON = {"backend": "lighton", "in_features": 8, "out_features": 64, "simulated": True}


@pytest.mark.parametrize(
    "base, key, value",
    [
        (SIM, "exposure_us", 1e-300),
        (SIM, "laser_power_uw", 1e-300),
        (SIM, "anchor_power_uw", 1e-300),
        (SIM, "quantum_efficiency", 1e-300),
        (SIM, "full_well_e", 1e308),
        (SIM, "block_mb", 1e308),
        (SIM, "cache_mb", 1e308),
        (SIM, "black_level_dn", 2**64),
        (SIM, "sensor_pixels", 2**63),
        (TORCH, "noise_std", 1e308),
        (TORCH, "matrix_std", 1e308),
        (TORCH, "in_features", 10**9),
        (TORCH, "out_features", 2**64),
        (LIGHTON, "noise_std", 1e308),
        (LIGHTON, "timeout_s", 1e-300),
        (LIGHTON, "exposure_us", 1e-300),
    ],
)
def test_profile_values_outside_physical_ranges_are_refused_naming_the_key(base, key, value):
    with pytest.raises(ProfileError, match=key):
        opu_hal.validate_profile({**base, key: value})


def test_lighton_retries_and_backoff_are_bounded_in_total():
    with pytest.raises(ProfileError, match=r"backoff_s \* \(2\^retries - 1\) <= 600"):
        opu_hal.validate_profile({**LIGHTON, "simulated": True, "retries": 20, "backoff_s": 60.0})


def test_torch_matrix_beyond_host_memory_is_refused_before_allocating():
    profile = opu_hal.validate_profile({**TORCH, "in_features": 2**24, "out_features": 2**24})
    with pytest.raises(ProfileError, match="need a .* GiB matrix"):
        opu_hal.load_device(profile)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda n: torch.zeros(2, n).to_sparse(), "sparse batches"),
        (lambda n: torch.zeros(2, n, device="meta"), "meta tensor"),
    ],
)
def test_sparse_and_meta_batches_are_typed_errors(make, match):
    with opu_hal.load_device(opu_hal.validate_profile(TORCH)) as device, pytest.raises(opu_hal.InputError, match=match):
        device.project(make(device.in_features))


def test_bfloat16_batches_are_projected():
    with opu_hal.load_device(opu_hal.validate_profile(TORCH)) as device:
        assert device.project(torch.ones(2, 8, dtype=torch.bfloat16)).values.shape == (2, 64)


def test_finite_batch_whose_projection_overflows_is_refused():
    with (
        opu_hal.load_device(opu_hal.validate_profile({**TORCH, "matrix_std": 1e6})) as device,
        pytest.raises(opu_hal.InputError, match="overflowed"),
    ):
        device.project(torch.full((2, 8), 3e37))


def test_host_memory_is_checked_when_a_batch_is_projected_not_declared(monkeypatch):
    from opu_hal.runtime import memory

    with opu_hal.load_device(opu_hal.validate_profile(SIM)) as device:
        described = device.capabilities
        monkeypatch.setattr(memory, "available_bytes", lambda: 2 * 12 * 4 * (8 + 64) * 100)  # 100 rows of opu-sim
        assert device.capabilities is described and described.max_batch is None  # built once
        device.project(torch.zeros(100, 8))
        with pytest.raises(opu_hal.HostMemoryError, match="101 rows"):
            device.project(torch.zeros(101, 8))


def test_fuzz_harness_classifies_clear_errors_and_accepted_profiles():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts/fuzz/hostile_inputs.py"
    spec = importlib.util.spec_from_file_location("hostile_inputs", path)
    fuzz = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fuzz)
    assert fuzz.classify_profile({**TORCH, "noise_std": 1e308}) == "clear"
    assert fuzz.classify_profile(TORCH) == "accepted"


def test_out_of_range_seed_and_missing_profile_folder_are_clear_errors(capsys):
    assert main(["train", "--method", "dfa", "--seed", "-1"]) == 2
    assert "--seed must be in [0, 2^63 - 1]" in capsys.readouterr().err
    assert main(["devices", "--dir", "/nonexistent"]) == 2
    assert "no profiles" in capsys.readouterr().err


def test_issue_32_surfaces_give_no_traceback_hang_or_silent_result(tmp_path):
    """Issue 32's corpus (calibrate, plan --profile, audit, train, plugins' neighbours, older
    surfaces), in-process: every case is a clear error or a correct answer, within a minute."""
    import importlib.util
    import time
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts/fuzz/hostile_inputs.py"
    spec = importlib.util.spec_from_file_location("hostile_inputs", path)
    fuzz = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fuzz)
    started = time.perf_counter()
    cases = fuzz.issue32_cases(tmp_path, timeout=20) + fuzz.plugin_cases(tmp_path / "plugins", timeout=20)
    outcomes = {label: case() for label, case in cases}
    bad = {label: o for label, o in outcomes.items() if o.startswith(("traceback", "hang", "silent"))}
    assert not bad
    valid = len(fuzz.issue32_valid_argvs(tmp_path)) + sum(not hostile for *_, hostile in fuzz.PLUGINS)
    assert sum(o == "accepted" for o in outcomes.values()) == valid
    assert time.perf_counter() - started < 60
