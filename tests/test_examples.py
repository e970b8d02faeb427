"""The examples/ scripts run in their --quick form and say what they promise."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_example(name: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), "--quick", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _epsilon(text: str) -> float:
    return float(re.search(r"epsilon (\d+\.\d+) at delta 1e-5", text).group(1))


def _require_fashion_mnist() -> None:
    """Skip without FashionMNIST, except in CI (``OPU_HAL_REQUIRE_DATA=1``), where its absence fails."""
    from trainers.core.data import DatasetError, load_dataset

    try:
        load_dataset("fashion-mnist")
    except DatasetError as exc:
        if os.environ.get("OPU_HAL_REQUIRE_DATA") == "1":
            pytest.fail(f"FashionMNIST is required here: {exc}")
        pytest.skip(f"FashionMNIST not installed: {exc}")


def test_private_own_mlp_spends_at_most_its_target_and_prints_no_training_loss():
    out = run_example("private_own_mlp.py")
    assert 2.9 < _epsilon(out) <= 3.0
    assert "loss" not in out


def test_private_class_mlp_dfa_trains_a_class_model_with_opu_noise_within_its_target():
    out = run_example("private_class_mlp_dfa.py")
    assert 2.9 < _epsilon(out) <= 3.0
    assert float(re.search(r"held-out accuracy (\d\.\d+)", out).group(1)) > 0.3  # chance: 0.1
    assert "loss" not in out


@pytest.mark.parametrize("method", ["pdfa", "dfa"])
def test_dfa_own_model_learns_and_reports_alignment(method):
    out = run_example("dfa_own_model.py", "--method", method)
    losses = [float(v) for v in re.findall(r"loss (\d+\.\d+)", out)]
    assert len(losses) == 2 and losses[-1] < 0.5
    assert "layer 4 1.00" in out  # the output layer gets backprop's own update


def test_calibrate_then_train_uses_the_calibrated_device(tmp_path):
    out = run_example("calibrate_then_train.py", "--out", str(tmp_path / "cal.json"))
    assert (tmp_path / "cal.json").exists()
    assert "reaches target: True" in out and "calibrated noise" in out
    # digitized reads come whole: one read per count already gives more noise than epsilon 3 needs here
    assert "1 read(s) per count" in out and 0.5 < _epsilon(out) <= 3.0


def test_private_cnn_groupnorm_fixes_batchnorm_and_learns_within_its_epsilon():
    _require_fashion_mnist()
    out = run_example("private_cnn_groupnorm.py")
    assert "refused: layer '1' (BatchNorm2d): batch normalisation mixes the examples" in out
    assert "'1': BatchNorm2d(8" in out and "-> GroupNorm(8, 8" in out
    assert 2.9 < _epsilon(out) <= 3.0
    assert float(re.search(r"test accuracy (\d\.\d+)", out).group(1)) > 0.3  # chance is 0.1
    assert "loss" not in out


def test_private_cnn_dfa_trains_a_class_cnn_with_opu_noise_within_its_epsilon():
    _require_fashion_mnist()
    out = run_example("private_cnn_dfa.py")
    assert 2.9 < _epsilon(out) <= 3.0
    assert "16 steps" in out
    assert float(re.search(r"test accuracy (\d\.\d+)", out).group(1)) > 0.15  # chance is 0.1; measured 0.30
    assert "loss" not in out


def test_api_plan_refuses_skellam_on_an_unproven_gain_and_plans_digitized(tmp_path):
    from opu_hal.contract.errors import CalibrationError
    from trainers.api import calibrate, plan

    out = tmp_path / "cal.json"
    calibrate("opu-sim-dp", out=out, temperatures=[25.0], frames=8, bootstrap=50)
    shape = dict(dataset_size=1024, batch_size=64, epochs=1, dimension=1994)
    with pytest.raises(CalibrationError, match="does not prove unity gain"):
        plan(out, "opu-sim-dp", 3.0, 1e-5, **shape)
    best = plan(out, "opu-sim-dp", 3.0, 1e-5, **shape, mechanism="digitized")[0]
    assert best.reaches_target and best.reads_per_value >= 1 and best.supplied <= 3.0
    assert best.kept_pixels is not None and best.frames_total >= best.frames_per_step * 16
