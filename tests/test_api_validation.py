"""The Python API validates as the command line does: every bad argument is an ``OpuHalError`` that
names the argument (and its allowed range), refused before anything is built, measured or released;
NaN or infinity in the data is refused at the loader, never trained on with an epsilon reported."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import opu_hal
from opu_hal import OpuHalError
from trainers.api import PrivacyEngine, attach_dfa, calibrate, plan

CAMERA = {
    "backend": "simulated",
    "in_features": 4,
    "out_features": 64,
    "seed": 3,
    "mode": "linear",
    "gain_e_per_dn": 1.0,
    "adc_bits": 12,
    "black_level_dn": 64,
    "anchor_power_uw": 2.0,
}


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3))


def _make_private(**changes):
    torch.manual_seed(0)
    model = _mlp()
    args = dict(
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        data_loader=(torch.randn(200, 5), torch.randint(0, 3, (200,))),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        batch_size=50,
    )
    args.update(changes)
    engine = PrivacyEngine()
    return engine, engine.make_private(**args)


@pytest.mark.parametrize(
    "changes, named",
    [
        ({"public_dataset_size": 0}, "public_dataset_size must be an integer in [1, inf]"),
        ({"noise_multiplier": "1.0"}, "noise_multiplier must be a finite number"),
        ({"noise_multiplier": None}, "noise_multiplier must be a finite number"),
        ({"batch_size": 2.5}, "batch_size must be an integer in [1, inf]"),
        ({"device": 42}, "device must be an opu_hal Device, a profile name or a profile path"),
        ({"feedback_seed": float("nan")}, "feedback_seed must be an integer in [0, "),
        ({"feedback_seed": -1}, "feedback_seed must be an integer in [0, "),
        ({"optimizer": []}, "optimizer must be a torch.optim.Optimizer"),
        ({"max_grad_norm": float("inf")}, "max_grad_norm must be a finite number in (0, 1e+06]"),
        ({"method": "dp-dfa", "max_grad_norm": float("inf")}, "max_grad_norm must be a finite number"),
        ({"method": "dp-dfa", "tau_h": float("nan")}, "tau_h must be a finite number in (0, 1e+06]"),
        ({"method": "dp-dfa", "tau_h": float("inf")}, "tau_h must be a finite number in (0, 1e+06]"),
        ({"method": "dp-dfa", "beta": -1}, "beta must be a finite number in (0, 1e+06]"),
        ({"data_loader": (torch.randn(200, 5), torch.randint(0, 3, (150,)))}, "must share a first dimension"),
        ({"target_delta": 1.5}, "target_delta must be a finite number in (0, 1)"),
        ({"loss_reduction": "avg"}, "loss_reduction must be one of 'mean', 'sum'"),
        ({"method": None}, "method None: choose one of"),
    ],
)
def test_make_private_refuses_a_bad_argument_naming_it(changes, named):
    with pytest.raises(OpuHalError) as caught:
        _make_private(**changes)
    assert named in str(caught.value)


@pytest.mark.parametrize("method", ["dp-sgd", "dp-dfa"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_data_is_refused_at_the_loader_and_nothing_is_charged(method, bad):
    x = torch.randn(200, 5)
    x[17, 2] = bad
    with pytest.raises(OpuHalError, match="NaN or infinite"):
        _, (model, optimizer, loader) = _make_private(method=method, data_loader=(x, torch.randint(0, 3, (200,))))
        for xb, yb in loader:
            optimizer.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            optimizer.step()


def test_a_dataset_with_nan_is_refused_when_its_batch_is_drawn():
    x = torch.randn(200, 5)
    x[::4] = float("nan")  # a quarter of the rows: every batch the loader draws holds some
    dataset = torch.utils.data.TensorDataset(x, torch.randint(0, 3, (200,)))
    _, (model, optimizer, loader) = _make_private(data_loader=torch.utils.data.Subset(dataset, range(200)))
    with pytest.raises(OpuHalError, match="NaN or infinite"):
        for xb, yb in loader:
            optimizer.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            optimizer.step()
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())


def test_state_dict_before_make_private_is_a_clear_error():
    with pytest.raises(OpuHalError, match="call make_private first"):
        PrivacyEngine().state_dict()


@pytest.mark.parametrize(
    "method, threshold, named",
    [
        ("DFA", 0.15, "method must be one of"),
        ("bogus", 0.15, "method must be one of"),
        (None, 0.15, "method must be one of"),
        ("tdfa", float("nan"), "threshold must be a finite number in [0, 1)"),
        ("tdfa", 1.5, "threshold must be a finite number in [0, 1)"),
    ],
)
def test_attach_dfa_refuses_a_bad_method_or_threshold(method, threshold, named):
    with pytest.raises(OpuHalError) as caught:
        attach_dfa(_mlp(), method, device="torch-cpu", threshold=threshold)
    assert named in str(caught.value)


@pytest.mark.parametrize(
    "device, options, named",
    [
        ("torch-cpu", {}, "has no camera to calibrate"),
        ("opu-sim-dp", {"temperatures": [25.0, 25.0]}, "temperatures must hold distinct values"),
        ("opu-sim-dp", {"temperatures": [25.0], "out": "/proc/nope/c.json"}, "out /proc/nope/c.json"),
        ("opu-sim-dp", {"temperatures": [25.0], "seed": -3}, "seed must be an integer in [0, "),
        ("opu-sim-dp", {"temperatures": [25.0], "bootstrap": -1}, "bootstrap must be an integer in [1, "),
        ("opu-sim-dp", {"temperatures": [float("nan")]}, "temperatures[0] must be a finite number"),
    ],
)
def test_calibrate_refuses_bad_arguments_before_measuring(device, options, named):
    with pytest.raises(OpuHalError) as caught:
        calibrate(device, frames=4, **{"bootstrap": 20, **options})
    assert named in str(caught.value)


@pytest.fixture(scope="module")
def camera_calibration(tmp_path_factory):
    """A small camera profile file and its calibration (two temperatures, four frames)."""
    folder = tmp_path_factory.mktemp("api-camera")
    (folder / "cam.toml").write_text("\n".join(f"{k} = {json.dumps(v)}" for k, v in CAMERA.items()) + "\n")
    with opu_hal.load_device(opu_hal.validate_profile(CAMERA)) as device:
        return folder, calibrate(device, [25.0, 40.0], [400.0], [100_000.0], frames=4, bootstrap=30)


SHAPE = dict(target_epsilon=8.0, delta=1e-5, dataset_size=54000, batch_size=256, epochs=5.0, sensitivity=1.0)


@pytest.mark.parametrize(
    "profile, changes, named",
    [
        ("torch-cpu", {}, "declares no camera model to plan with"),
        ("opu-sim", {}, "taken on another device"),
        ("cam", {"epochs": float("nan")}, "epochs must be a finite number"),
        ("cam", {"batch_size": 0}, "batch_size must be an integer in [1, 54000]"),
        ("cam", {"mechanism": "laplace"}, "mechanism must be one of"),
        ("cam", {"dataset_size": 10**8, "batch_size": 1, "epochs": 0.5}, "over the 10000000 a run may plan"),
    ],
)
def test_plan_refuses_bad_arguments_and_another_devices_calibration(profile, changes, named, camera_calibration):
    folder, calibration = camera_calibration
    target = str(folder / "cam.toml") if profile == "cam" else profile
    with pytest.raises(OpuHalError) as caught:
        plan(calibration, target, **{**SHAPE, "mechanism": "gaussian", **changes})
    assert named in str(caught.value)


def test_plan_on_its_own_devices_calibration_still_plans(camera_calibration):
    folder, calibration = camera_calibration
    assert plan(calibration, str(folder / "cam.toml"), **SHAPE, mechanism="gaussian")
