"""Private trainers: DP-DFA (paper 002), photonic DP-DFA (paper 000), DP-SGD; budget; resume."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy import stats

from opu_hal.privacy import Accountant, FixedSizeGaussianEvent
from trainers.checkpoint import load_checkpoint
from trainers.config import TrainConfig
from trainers.device_noise import DeviceNoise
from trainers.errors import TrainingConfigError
from trainers.loop import Trainer, train
from trainers.methods import METHODS, MethodContext
from trainers.model import MLP

from .test_data import make_dataset
from .training_helpers import clusters, simulated_device, torch_device

HIDDEN = (16, 24)


def cfg(method: str, **kw) -> TrainConfig:
    base = dict(epochs=2, batch_size=20, hidden=HIDDEN, seed=0)
    base.update(kw)
    return TrainConfig.for_method(method, **base)


def quiet_train(config: TrainConfig, **kw):
    return train(config, progress=False, log=lambda message: None, **kw)


def noiseless_update(method, x, y) -> torch.Tensor:
    method.set_noise_multiplier(1e-30)
    method.compute_gradients(x, y)
    return torch.cat([p.grad.flatten() for p in method.model.parameters()])


def test_dp_dfa_sensitivity_is_paper_formula_when_layers_share_the_bound():
    """Section 4.2: Delta = 2 gamma beta tau_e sqrt((1 + tau_h^2) L) / m (sigmoid: gamma = 1/4)."""
    config = cfg("dp-dfa", noise_multiplier=1.0)
    method = METHODS["dp-dfa"](MLP([20, *HIDDEN, 10], "sigmoid"), MethodContext(config, None, 20, 10, 600))
    expected = 2 * 0.25 * 0.9 * config.tau_e * math.sqrt((1 + config.tau_h**2) * 3) / config.batch_size
    assert method.sensitivity == pytest.approx(expected)


@pytest.mark.parametrize("method_name", ["dp-dfa", "dp-sgd"])
def test_replacing_one_example_moves_the_update_by_at_most_the_sensitivity(method_name):
    extra = {"sampling": "fixed", "clip_norm": 0.5} if method_name == "dp-sgd" else {"tau_h": 0.7}
    config = cfg(method_name, noise_multiplier=1.0, **extra)
    data = clusters(spread=3.0)
    model = MLP([20, *HIDDEN, 10], activation=config.activation)
    method = METHODS[method_name](model, MethodContext(config, None, 20, 10, 600))
    x, y = data.train.x[:20] * 5, data.train.y[:20]
    base = noiseless_update(method, x, y)
    worst = 0.0
    for seed in range(20):
        g = torch.Generator().manual_seed(seed)
        x2, y2 = x.clone(), y.clone()
        x2[seed % 20] = 10 * torch.randn(20, generator=g)
        y2[seed % 20] = (y[seed % 20] + 1 + seed) % 10
        worst = max(worst, float((noiseless_update(method, x2, y2) - base).norm()))
    bound = method.sensitivity / (config.batch_size if method_name == "dp-sgd" else 1)
    assert 0 < worst <= bound * (1 + 1e-5)


def test_dp_sgd_ghost_norms_clip_like_explicit_per_example_gradients():
    config = cfg("dp-sgd", noise_multiplier=1.0, clip_norm=0.3, sampling="fixed")
    model = MLP([20, *HIDDEN, 10], activation="tanh", seed=3)
    method = METHODS["dp-sgd"](model, MethodContext(config, None, 20, 10, 600))
    data = clusters()
    x, y = data.train.x[:20], data.train.y[:20]
    ours = noiseless_update(method, x, y)
    total = torch.zeros_like(ours)
    for i in range(20):
        model.zero_grad()
        F.cross_entropy(model(x[i:i + 1]), y[i:i + 1]).backward()
        grad = torch.cat([p.grad.flatten() for p in model.parameters()])
        total += grad * min(1.0, 0.3 / float(grad.norm()))
    assert torch.allclose(ours, total / 20, atol=1e-6)


def test_dp_sgd_noise_has_the_accounted_std():
    config = cfg("dp-sgd", noise_multiplier=2.0, clip_norm=0.5)
    model = MLP([20, 64, 64, 10])
    method = METHODS["dp-sgd"](model, MethodContext(config, None, 20, 10, 600))
    method.set_noise_multiplier(2.0)
    method.compute_gradients(torch.zeros(0, 20), torch.zeros(0, dtype=torch.long))
    noise = torch.cat([p.grad.flatten() for p in model.parameters()]) * config.batch_size
    assert float(noise.std()) == pytest.approx(2.0 * 0.5, rel=0.03)


def test_budget_stops_before_the_step_that_would_cross_it():
    config = cfg("dp-dfa", epochs=5, noise_multiplier=0.8, target_epsilon=3.0, alignment=False)
    record = quiet_train(config, data=clusters())
    final = record["final"]
    assert record["privacy"]["stopped_by_budget"] and final["epsilon"] <= 3.0
    accountant = Accountant("replace_one")
    accountant.step(FixedSizeGaussianEvent(600, 20, 0.8), final["steps"] + 1)
    assert accountant.get_epsilon(1e-5) > 3.0


def test_target_epsilon_chooses_the_noise_and_is_met():
    record = quiet_train(cfg("dp-sgd", epochs=2, target_epsilon=2.0), data=clusters())
    assert record["final"]["epsilon"] <= 2.0 and record["final"]["delta"] == 1e-5
    assert record["privacy"]["noise_multiplier"] > 0.5
    assert record["final"]["epsilon"] > 1.9  # the planned run uses the budget, not a fraction


def test_private_methods_learn_clusters():
    data = clusters(n_train=3000, spread=0.3)
    record = quiet_train(cfg("dp-dfa", epochs=4, target_epsilon=8.0, lr=0.01), data=data)
    assert record["final"]["test_accuracy"] > 0.3  # chance is 0.1
    record = quiet_train(cfg("dp-sgd", epochs=4, target_epsilon=8.0, lr=0.01), data=data)
    assert record["final"]["test_accuracy"] > 0.5


def test_device_noise_has_the_declared_std_and_no_correlation():
    device = simulated_device(out_features=256)
    source = DeviceNoise(device, seed=0)
    draws = torch.stack([source.standard(2048) for _ in range(40)]).double()  # (steps, coordinates)
    lower = source.last_report.std_lower
    declared = source.last_report.std
    values = draws.flatten() * lower
    # Variance: chi-square interval for the declared std (per-coordinate variances average to it).
    n = values.numel()
    ratio = float(values.var()) / declared**2
    half_width = 4 * math.sqrt(2 / n)
    assert abs(ratio - 1) < half_width + 0.05
    assert float(draws.std()) >= 1.0  # unit-scaled by std_lower: never below the accounted std
    assert abs(float(values.mean())) < 4 * declared / math.sqrt(n)
    limit = 4 / math.sqrt(draws.shape[0] * (draws.shape[1] - 1))
    across_coordinates = float(torch.corrcoef(torch.stack([draws[:, :-1].flatten(), draws[:, 1:].flatten()]))[0, 1])
    across_steps = float(torch.corrcoef(torch.stack([draws[:-1].flatten(), draws[1:].flatten()]))[0, 1])
    assert abs(across_coordinates) < limit * 1.5 and abs(across_steps) < limit * 1.5
    # Shot noise differs by coordinate; each coordinate's variance must stay above std_lower^2.
    per_coordinate = (draws.var(dim=0) * lower**2 / lower**2).numpy()
    floor = stats.chi2.ppf(1e-3, draws.shape[0] - 1) / (draws.shape[0] - 1)
    assert np.mean(per_coordinate < floor) <= 0.005


def test_device_noise_refuses_a_noiseless_or_intensity_device():
    with pytest.raises(TrainingConfigError, match="std_lower = 0"):
        DeviceNoise(torch_device(noise_std=0.0))
    from opu_hal import load_device
    from opu_hal.profiles import validate_profile
    intensity = load_device(validate_profile({"backend": "simulated", "in_features": 10, "out_features": 32,
                                              "mode": "intensity"}))
    with pytest.raises(TrainingConfigError, match="intensity"):
        DeviceNoise(intensity)


def test_dp_dfa_with_device_noise_accounts_with_std_lower_scaled_noise():
    """The accountant is charged z (ledger), the record's noise std is z * Delta, and the noise the
    device actually adds to the update (repeats of one step, same batch) is at least that std."""
    config = cfg("dp-dfa", noise_source="device", noise_multiplier=1.0, epochs=1, alignment=False)
    record = quiet_train(config, data=clusters(), device=simulated_device(out_features=512))
    privacy = record["privacy"]
    assert privacy["noise_source"] == "device" and privacy["device_projections_for_noise"] > 0
    assert record["noise_reports"][0]["operating_point"]["source"] == "declared"
    assert [e["event"]["noise_multiplier"] for e in privacy["ledger"]["entries"]] == [1.0]
    assert privacy["noise_std"] == pytest.approx(1.0 * privacy["sensitivity"])

    data = clusters()
    model = MLP([20, *HIDDEN, 10], config.activation)
    method = METHODS["dp-dfa"](model, MethodContext(config, simulated_device(out_features=512), 20, 10, 600))
    method.set_noise_multiplier(1.0)
    x, y = data.train.x[:config.batch_size], data.train.y[:config.batch_size]
    updates = []
    for step in range(8):
        method.current_step = step
        method.compute_gradients(x, y)
        updates.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    noise = torch.stack(updates) - torch.stack(updates).mean(0)
    applied = float(noise.pow(2).sum() / (noise.numel() - noise.shape[1])) ** 0.5
    assert applied >= 0.97 * method.noise_std  # >= 1 std_lower unit per coordinate, before scaling


def test_photonic_dp_prints_eq17_epsilon_which_is_infinite_for_tanh():
    config = cfg("photonic-dp", epochs=1, software_noise_std=0.05, alignment=False)
    record = quiet_train(config, data=clusters(), device=torch_device(noise_std=0.1))
    assert record["privacy"]["std_lower_accounted"] == pytest.approx(0.05)
    assert math.isinf(record["final"]["epsilon"])
    with pytest.raises(TrainingConfigError, match="infinite"):
        Trainer(cfg("photonic-dp", software_noise_std=0.05, target_epsilon=8.0), data=clusters(), device=torch_device(),
                progress=False, log=lambda m: None)


def test_photonic_dp_clips_layer_inputs_to_tau_h_max():
    config = cfg("photonic-dp", software_noise_std=0.0, tau_h_max=1.0)
    method = METHODS["photonic-dp"](MLP([20, *HIDDEN, 10]), MethodContext(config, torch_device(), 20, 10, 600))
    clipped = method.clip_input(torch.randn(50, 16) * 10)
    assert float(clipped.norm(dim=1).max()) <= 1.0 + 1e-6


ROOT = Path(__file__).resolve().parent.parent


def _run_cli(args: list[str], data_dir: Path, kill_after_step: int | None = None) -> subprocess.CompletedProcess:
    """``opu-hal train ARGS`` in a subprocess; with ``kill_after_step``, SIGKILLed after that step."""
    env = {**os.environ, "OPU_HAL_DATA_DIR": str(data_dir)}
    command = (["-m", "trainers.cli", "train"] if kill_after_step is None
               else ["-m", "tests.kill_after", str(kill_after_step)])
    return subprocess.run([sys.executable, *command, *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_killed_run_resumes_with_the_ledger_of_an_uninterrupted_run(tmp_path):
    make_dataset(tmp_path, n_train=400, n_test=50, compress=False)
    common = ["--method", "dp-dfa", "--epochs", "2", "--batch-size", "20", "--hidden", "16,16",
              "--noise-multiplier", "1.0", "--quiet", "--no-alignment", "--checkpoint-every", "4"]
    whole = _run_cli([*common, "--out", str(tmp_path / "whole.json")], tmp_path)
    assert whole.returncode == 0, whole.stderr
    ck = tmp_path / "run.ckpt"
    killed = _run_cli([*common, "--checkpoint", str(ck)], tmp_path, kill_after_step=27)
    assert killed.returncode == -9  # killed mid-epoch 2 (18 steps per epoch), 3 steps after a checkpoint
    assert load_checkpoint(ck)["global_step"] == 24
    resumed = _run_cli([*common, "--checkpoint", str(ck), "--resume", "--out", str(tmp_path / "resumed.json")], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "replaying 3 step(s)" in resumed.stderr
    import json
    a, b = (json.loads((tmp_path / name).read_text()) for name in ("whole.json", "resumed.json"))
    assert a["privacy"]["ledger"] == b["privacy"]["ledger"]
    assert a["final"]["epsilon"] == b["final"]["epsilon"] and a["final"]["steps"] == b["final"]["steps"] == 36
    # The 3 replayed steps are bit-for-bit: the final model evaluates identically.
    for key in ("test_accuracy", "test_loss", "validation_loss", "validation_accuracy"):
        assert a["epochs"][1][key] == b["epochs"][1][key], key


def test_resume_charges_lost_steps_when_noise_came_from_a_device(tmp_path):
    make_dataset(tmp_path, n_train=400, n_test=50, compress=False)
    common = ["--method", "dp-dfa", "--epochs", "1", "--batch-size", "20", "--hidden", "16,16",
              "--noise-multiplier", "1.0", "--quiet", "--no-alignment", "--checkpoint-every", "5",
              "--noise-source", "device", "--profile", "opu-sim"]
    ck = tmp_path / "run.ckpt"
    killed = _run_cli([*common, "--checkpoint", str(ck)], tmp_path, kill_after_step=7)
    assert killed.returncode == -9
    resumed = _run_cli([*common, "--checkpoint", str(ck), "--resume", "--out", str(tmp_path / "r.json")], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    import json
    record = json.loads((tmp_path / "r.json").read_text())
    assert record["privacy"]["lost_steps_charged"] == 2
    total = sum(entry["count"] for entry in record["privacy"]["ledger"]["entries"])
    assert total == 18 + 2


def test_resume_refuses_a_checkpoint_made_with_other_settings(tmp_path):
    ck = tmp_path / "c.ckpt"
    quiet_train(cfg("dp-dfa", epochs=1, noise_multiplier=1.0, checkpoint=str(ck), alignment=False), data=clusters())
    with pytest.raises(TrainingConfigError, match="batch_size"):
        Trainer(cfg("dp-dfa", batch_size=30, noise_multiplier=1.0, checkpoint=str(ck), resume=True),
                data=clusters(), progress=False, log=lambda m: None)


def test_photonic_dp_charges_the_event_its_step_returned_not_the_planned_one():
    """The device's noise drops after the 2nd projection: the 3rd step's planned event still has
    the old std_lower, its returned event the new one, and the ledger holds the returned one."""
    from opu_hal.backends.torch_backend import TorchDevice

    class DroppingNoise(TorchDevice):
        def _project(self, x):
            projection = super()._project(x)
            self.projections = getattr(self, "projections", 0) + 1
            if self.projections == 2:
                self.set_options(noise_std=0.05)
            return projection

    device = DroppingNoise(torch_device(noise_std=0.1).profile)
    trainer = Trainer(cfg("photonic-dp", epochs=1, alignment=False), data=clusters(), device=device,
                      progress=False, log=lambda m: None)
    planned = []
    original = trainer.method.compute_gradients

    def spy(x, y):
        planned.append(trainer.method.planned_event())
        output = original(x, y)
        planned[-1] = (planned[-1], output.privacy_event)
        return output

    trainer.method.compute_gradients = spy
    record = trainer.run()
    entries = record["privacy"]["ledger"]["entries"]
    sigmas = [{part["sigma"] for part in entry["event"]["parts"]} for entry in entries]
    assert sigmas == [{0.1}, {0.05}]
    assert [entry["count"] for entry in entries] == [2, record["final"]["steps"] - 2]
    third_planned, third_spent = planned[2]
    assert {p.sigma for p in third_planned.parts} == {0.1}
    assert {p.sigma for p in third_spent.parts} == {0.05}
    assert entries[1]["event"] == third_spent.to_dict()
