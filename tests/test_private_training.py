"""Private trainers: DP-DFA (paper 002), photonic DP-DFA (paper 000), DP-SGD; budget; resume."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from opu_hal import load_device, load_profile, validate_profile
from opu_hal.privacy import Accountant, FixedSizeGaussianEvent, PoissonGaussianEvent
from tests.test_data import make_dataset
from tests.training_helpers import clusters, simulated_device, torch_device
from trainers.core.errors import CheckpointError, TrainingConfigError
from trainers.core.model import MLP
from trainers.methods import METHODS, MethodContext
from trainers.run.config import TrainConfig
from trainers.run.journal import load_checkpoint
from trainers.run.loop import Trainer, train

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


def test_dp_dfa_poisson_adding_one_example_moves_the_sum_by_at_most_half_the_replace_one_sensitivity():
    """--sampling poisson (add/remove): one example adds its own clipped term, so the bound is the
    fixed-size (replace-one) one over 2, and an adversarial added example reaches most of it."""
    fixed = cfg("dp-dfa", noise_multiplier=1.0, tau_h=0.7, tau_e=0.1)
    poisson = fixed.with_(sampling="poisson")
    model = MLP([20, *HIDDEN, 10], activation=fixed.activation)
    method = METHODS["dp-dfa"](model, MethodContext(poisson, None, 20, 10, 600))
    reference = METHODS["dp-dfa"](model, MethodContext(fixed, None, 20, 10, 600))
    assert method.neighboring == "add_remove" and reference.neighboring == "replace_one"
    assert method.sensitivity == pytest.approx(reference.sensitivity / 2)
    data = clusters(spread=3.0)
    x, y = data.train.x[:20] * 5, data.train.y[:20]
    base = noiseless_update(method, x, y)
    worst = 0.0
    for seed in range(20):
        g = torch.Generator().manual_seed(seed)
        extra_x = torch.cat([x, 10 * torch.randn(1, 20, generator=g)])
        extra_y = torch.cat([y, torch.tensor([(seed * 3) % 10])])
        worst = max(worst, float((noiseless_update(method, extra_x, extra_y) - base).norm()))
    assert 0.3 * method.sensitivity < worst <= method.sensitivity * (1 + 1e-5)


def test_dp_dfa_poisson_is_accounted_as_the_poisson_subsampled_gaussian_under_add_remove():
    record = quiet_train(
        cfg("dp-dfa", sampling="poisson", noise_multiplier=1.3, epochs=2, alignment=False), data=clusters()
    )
    privacy = record["privacy"]
    assert privacy["neighboring"] == "add_remove"
    entries = privacy["ledger"]["entries"]
    assert entries == [
        {
            "event": {"kind": "poisson_gaussian", "sampling_rate": 20 / 600, "noise_multiplier": 1.3},
            "count": record["final"]["steps"],
        }
    ]
    reference = Accountant("add_remove")
    reference.step(PoissonGaussianEvent(20 / 600, 1.3), record["final"]["steps"])
    assert record["final"]["epsilon"] == pytest.approx(reference.get_epsilon(1e-5))


def test_dp_dfa_poisson_with_device_noise_charges_the_poisson_lattice_event_under_add_remove():
    config = cfg("dp-dfa", sampling="poisson", noise_source="device", noise_multiplier=1.0, epochs=1, alignment=False)
    record = quiet_train(config, data=clusters(), device=load_device("opu-sim-dp"))
    privacy = record["privacy"]
    assert privacy["neighboring"] == "add_remove" and privacy["mechanism"] == "skellam"
    event = privacy["ledger"]["entries"][0]["event"]
    assert event["kind"] == "poisson_rounded_skellam" and event["sampling_rate"] == pytest.approx(20 / 600)
    assert event["poisson_mean"] == privacy["lattice"]["poisson_mean_accounted"]
    assert privacy["device_noise"]["poisson_mean_lower"] >= event["poisson_mean"]
    # add/remove: one example's clipped term, half the replace-one sensitivity of the fixed-size run
    fixed = quiet_train(
        cfg("dp-dfa", noise_source="device", noise_multiplier=1.0, epochs=1, alignment=False),
        data=clusters(),
        device=load_device("opu-sim-dp"),
    )
    assert privacy["sensitivity"] == pytest.approx(fixed["privacy"]["sensitivity"] / 2)


def test_dp_dfa_refuses_unknown_samplings():
    with pytest.raises(TrainingConfigError, match="choose fixed"):
        quiet_train(cfg("dp-dfa", sampling="rejection", noise_multiplier=1.0, epochs=1), data=clusters())


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
        F.cross_entropy(model(x[i : i + 1]), y[i : i + 1]).backward()
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
    record = quiet_train(cfg("dp-dfa", epochs=4, target_epsilon=8.0, lr=0.03), data=data)
    assert record["final"]["test_accuracy"] > 0.4  # chance is 0.1; 0.77 to 0.83 in 4 runs
    record = quiet_train(cfg("dp-sgd", epochs=4, target_epsilon=8.0, lr=0.01), data=data)
    assert record["final"]["test_accuracy"] > 0.5


def test_dp_dfa_device_noise_refuses_a_device_that_cannot_serve_privacy_noise():
    # Not 1 e-/DN (no Skellam counts) and no read noise (no digitized read law): neither route.
    profile = validate_profile(
        {
            "backend": "simulated",
            "in_features": 10,
            "out_features": 64,
            "seed": 0,
            "mode": "linear",
            "gain_e_per_dn": 2.0,
            "read_noise_e": 0.0,
        }
    )
    device = load_device(profile)
    assert not (device.capabilities.privacy_noise or device.capabilities.digitized_noise)
    config = cfg("dp-dfa", noise_source="device", noise_multiplier=1.0, epochs=1)
    with pytest.raises(TrainingConfigError, match="gain_e_per_dn|no privacy-noise source"):
        quiet_train(config, data=clusters(), device=device)


def test_dp_dfa_device_noise_on_a_digitized_camera_takes_the_digitized_route():
    # the default camera (not 1 e-/DN, with read noise) with a flat reference beam: the digitized route
    # accounts a flat anchor (a speckle anchor: per bin of its kept pixels, tests/test_speckle_digitized.py)
    device = simulated_device(out_features=64, privacy_anchor="reference-beam")
    assert device.capabilities.digitized_noise and not device.capabilities.privacy_noise
    for sampling, kind in (("fixed", "fixed_size_digitized_noise"), ("poisson", "poisson_digitized_noise")):
        config = cfg(
            "dp-dfa", noise_source="device", noise_multiplier=1.0, epochs=1, alignment=False, sampling=sampling
        )
        record = quiet_train(config, data=clusters(), device=device)
        kinds = {entry["event"]["kind"] for entry in record["privacy"]["ledger"]["entries"]}
        assert kinds == {kind}


def test_dp_dfa_with_device_noise_charges_the_skellam_event_at_the_delivered_poisson_mean():
    config = cfg("dp-dfa", noise_source="device", noise_multiplier=1.0, epochs=1, alignment=False)
    record = quiet_train(config, data=clusters(), device=load_device("opu-sim-dp"))
    privacy = record["privacy"]
    assert privacy["mechanism"] == "skellam" and privacy["generator"].startswith("ChaCha20")
    accounted = privacy["lattice"]["poisson_mean_accounted"]
    assert privacy["device_noise"]["poisson_mean_lower"] >= accounted
    event = privacy["ledger"]["entries"][0]["event"]
    assert event["kind"] == "fixed_size_rounded_skellam" and event["poisson_mean"] == accounted
    assert event["l2_sensitivity"] == pytest.approx(privacy["lattice"]["l2_sensitivity"])
    noise = privacy["device_noise"]  # two counts per coordinate, read in pairs of frames over the kept pixels
    frames = noise["frames"]
    assert frames == 2 * math.ceil(privacy["lattice"]["dimension"] * noise["reads_per_value"] / noise["kept_pixels"])
    frame_s = 1 / 70  # the CMV2000 at 12 bits (opu_hal/camera/datasheet.py)
    checks = -(-record["final"]["steps"] // noise["anchor_check_every"])  # drift-check frames, the first included
    assert record["final"]["camera_frames"] == frames * record["final"]["steps"] + checks
    assert record["final"]["camera_seconds"] == pytest.approx((frames * record["final"]["steps"] + checks) * frame_s)


def test_dp_dfa_worst_case_rounding_analysis_is_still_available():
    config = cfg(
        "dp-dfa", noise_source="device", noise_multiplier=1.0, epochs=1, alignment=False, rounding_analysis="worst-case"
    )
    record = quiet_train(config, data=clusters(), device=load_device("opu-sim-dp"))
    assert record["privacy"]["ledger"]["entries"][0]["event"]["kind"] == "fixed_size_skellam"


def test_dp_dfa_device_release_has_at_least_the_noise_std_it_accounts():
    # k = 33 asks lambda = (1 x 33)^2 / 2 = 544.5 e- per count: one anchor read (576 e-) supplies it.
    config = cfg("dp-dfa", noise_source="device", noise_multiplier=1.0, lattice_resolution=33.0)
    flat = load_profile("opu-sim-dp").model_copy(update={"privacy_anchor": "reference-beam", "anchor_power_uw": 2.0})
    method = METHODS["dp-dfa"](MLP([20, *HIDDEN, 10], "sigmoid"), MethodContext(config, load_device(flat), 20, 10, 600))
    method.set_noise_multiplier(1.0)
    released = method.release_update(torch.zeros(200_000))
    # Applied = accounted Skellam, plus the read's surplus mean (576 / 544.5: 3%) and read noise (~3%); never less.
    assert method.noise_std * 0.99 <= float(released.std()) <= method.noise_std * 1.08
    assert method.noise_std == pytest.approx(1.0 * method.sensitivity)  # per coordinate: no (k + 1) / k


def test_software_noise_replays_exactly_from_the_generator_state():
    config = cfg("dp-dfa", noise_multiplier=1.0)
    method = METHODS["dp-dfa"](MLP([20, *HIDDEN, 10], "sigmoid"), MethodContext(config, None, 20, 10, 600))
    method.set_noise_multiplier(1.0)
    state = method.state_dict()
    first = method.release_update(torch.zeros(1000))
    method.load_state_dict(state)
    assert torch.equal(method.release_update(torch.zeros(1000)), first)


def test_photonic_dp_prints_eq17_epsilon_which_is_infinite_for_tanh():
    config = cfg("photonic-dp", epochs=1, software_noise_std=0.05, alignment=False)
    record = quiet_train(config, data=clusters(), device=torch_device(noise_std=0.1))
    assert record["privacy"]["std_lower_accounted"] == pytest.approx(0.05)
    assert math.isinf(record["final"]["epsilon"])
    with pytest.raises(TrainingConfigError, match="infinite"):
        Trainer(
            cfg("photonic-dp", software_noise_std=0.05, target_epsilon=8.0),
            data=clusters(),
            device=torch_device(),
            progress=False,
            log=lambda m: None,
        )


def test_photonic_dp_clips_layer_inputs_to_tau_h_max():
    config = cfg("photonic-dp", software_noise_std=0.0, tau_h_max=1.0)
    method = METHODS["photonic-dp"](MLP([20, *HIDDEN, 10]), MethodContext(config, torch_device(), 20, 10, 600))
    clipped = method.clip_input(torch.randn(50, 16) * 10)
    assert float(clipped.norm(dim=1).max()) <= 1.0 + 1e-6


def _first_layer_grad_for(config, x, y):
    model = MLP([20, *HIDDEN, 10])
    method = METHODS["photonic-dp"](model, MethodContext(config, torch_device(), 20, 10, 600))
    method.compute_gradients(x, y)
    return model.layers[0].weight.grad.clone(), model.layers[1].weight.grad.clone(), method


def test_no_clip_pixels_leaves_the_pixels_unclipped_and_still_clips_the_hidden_neurons():
    """Paper 000's text clips "the neurons": the variant skips eq. 9 on layer 0's input only."""
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(8, 20, generator=g) * 5, torch.randint(0, 10, (8,), generator=g)
    both = cfg("photonic-dp", software_noise_std=0.0, batch_size=8)
    hidden_only = cfg("photonic-dp", software_noise_std=0.0, batch_size=8, clip_pixels=False)
    torch.manual_seed(1)
    first_a, second_a, _ = _first_layer_grad_for(both, x, y)
    torch.manual_seed(1)
    first_b, second_b, method = _first_layer_grad_for(hidden_only, x, y)
    assert first_b.abs().max() > 5 * first_a.abs().max()  # the pixels (norm ~22) reach layer 0 unclipped
    assert torch.allclose(second_a, second_b, atol=1e-6)  # hidden neurons clipped either way
    method.after_step()
    assert method.paper_claim.steps == 0 and "premise fails" in method.describe()["clipped_inputs"]


def test_no_clip_pixels_is_refused_for_other_methods():
    with pytest.raises(TrainingConfigError, match="photonic-dp only"):
        cfg("dp-dfa", noise_multiplier=1.0, clip_pixels=False)


ROOT = Path(__file__).resolve().parent.parent


def _run_cli(args: list[str], data_dir: Path, kill_after_step: int | None = None) -> subprocess.CompletedProcess:
    """``opu-hal train ARGS`` in a subprocess; with ``kill_after_step``, SIGKILLed after that step."""
    env = {**os.environ, "OPU_HAL_DATA_DIR": str(data_dir)}
    command = (
        ["-m", "trainers.cli", "train"] if kill_after_step is None else ["-m", "tests.kill_after", str(kill_after_step)]
    )
    return subprocess.run(
        [sys.executable, *command, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def _ledger_steps(record) -> int:
    return sum(entry["count"] for entry in record["privacy"]["ledger"]["entries"])


COMMON = [
    "--method",
    "dp-dfa",
    "--batch-size",
    "20",
    "--hidden",
    "16,16",
    "--noise-multiplier",
    "1.0",
    "--quiet",
    "--no-alignment",
]


def test_killed_run_resumes_with_the_ledger_of_an_uninterrupted_run(tmp_path):
    make_dataset(tmp_path, n_train=400, n_test=50, compress=False)
    common = [*COMMON, "--epochs", "2", "--checkpoint-every", "4"]
    whole = _run_cli([*common, "--out", str(tmp_path / "whole.json")], tmp_path)
    assert whole.returncode == 0, whole.stderr
    ck = tmp_path / "run.ckpt"
    killed = _run_cli([*common, "--checkpoint", str(ck)], tmp_path, kill_after_step=27)
    assert killed.returncode == -9  # killed mid-epoch 2 (18 steps per epoch), 3 steps after a checkpoint
    assert load_checkpoint(ck)["progress"]["global_step"] == 24
    resumed = _run_cli(
        [*common, "--checkpoint", str(ck), "--resume", "--out", str(tmp_path / "resumed.json")], tmp_path
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "replaying 3 step(s)" in resumed.stderr
    import json

    a, b = (json.loads((tmp_path / name).read_text()) for name in ("whole.json", "resumed.json"))
    assert a["privacy"]["ledger"] == b["privacy"]["ledger"]
    assert a["final"]["epsilon"] == b["final"]["epsilon"] and a["final"]["steps"] == b["final"]["steps"] == 36


@pytest.fixture
def device_run(tmp_path):
    make_dataset(tmp_path, n_train=400, n_test=50, compress=False)
    common = [
        *COMMON,
        "--epochs",
        "1",
        "--checkpoint-every",
        "5",
        "--noise-source",
        "device",
        "--profile",
        "opu-sim-dp",
        "--checkpoint",
        str(tmp_path / "run.ckpt"),
    ]
    assert _run_cli(common, tmp_path, kill_after_step=7).returncode == -9  # 7 drawn, 5 saved
    return tmp_path, common


def test_device_noise_steps_are_charged_once_through_two_kills(device_run):
    """Kill after a checkpoint, resume, kill again before the next checkpoint, resume: every draw charged."""
    import json

    tmp_path, common = device_run
    again = _run_cli([*common, "--resume"], tmp_path, kill_after_step=9)
    assert again.returncode == -9 and "charged 2 step(s)" in again.stderr  # then steps 5..8 drawn again
    final = _run_cli([*common, "--resume", "--out", str(tmp_path / "r.json")], tmp_path)
    assert final.returncode == 0, final.stderr
    record = json.loads((tmp_path / "r.json").read_text())
    journal = (tmp_path / "run.ckpt.journal").read_text().split()
    assert _ledger_steps(record) == len(journal) == 18 + 2 + 4  # 18 steps, 2 + (9 - 5) lost draws
    assert record["privacy"]["lost_steps_charged"] == 6


def test_restarting_without_resume_over_a_recorded_run_is_refused(device_run):
    tmp_path, common = device_run
    result = _run_cli(common, tmp_path)
    assert result.returncode == 2 and "--resume" in result.stderr


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda p: (p / "run.ckpt.journal").unlink(), "truncated or deleted"),
        (lambda p: (p / "run.ckpt.journal").write_text("0\n1\n99999999\n"), "journal is corrupt"),
        (lambda p: (p / "run.ckpt").write_bytes(_flip_bit((p / "run.ckpt").read_bytes())), "corrupted"),
    ],
)
def test_resume_refuses_a_damaged_journal_or_checkpoint(device_run, damage, message):
    tmp_path, common = device_run
    damage(tmp_path)
    result = _run_cli([*common, "--resume"], tmp_path)
    assert result.returncode == 2 and message in result.stderr


def _flip_bit(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 1]) + data[middle + 1 :]


@pytest.mark.parametrize(
    "option", [["--noise-multiplier", "0.3"], ["--epochs", "3"], ["--delta", "1e-6"], ["--profile", "torch-cpu"]]
)
def test_resume_refuses_any_changed_privacy_data_or_model_setting(device_run, option):
    tmp_path, common = device_run
    changed = list(common)
    if option[0] in changed:
        changed[changed.index(option[0]) + 1] = option[1]
    else:
        changed += option
    result = _run_cli([*changed, "--resume"], tmp_path)
    assert result.returncode == 2 and option[0].lstrip("-").replace("-", "_") in result.stderr


def test_resume_refuses_a_checkpoint_made_with_other_settings(tmp_path):
    ck = tmp_path / "c.ckpt"
    quiet_train(cfg("dp-dfa", epochs=1, noise_multiplier=1.0, checkpoint=str(ck), alignment=False), data=clusters())
    with pytest.raises(TrainingConfigError, match="batch_size"):
        Trainer(
            cfg("dp-dfa", batch_size=30, noise_multiplier=1.0, checkpoint=str(ck), resume=True),
            data=clusters(),
            progress=False,
            log=lambda m: None,
        )


def test_the_ledger_holds_the_event_each_step_returned_not_the_planned_one():
    """A method whose steps from the 3rd on spend more than planned: the ledger charges what they
    returned (photonic-dp's device noise can drop mid-run in the same way)."""
    from opu_hal.privacy import GaussianEvent
    from trainers.methods import register_method, unregister_method
    from trainers.methods.bp import Backprop

    class Varying(Backprop):
        name = "varying-test"
        private = True
        neighboring = "replace_one"

        def planned_event(self):
            return GaussianEvent(10.0)

        def compute_gradients(self, x, y):
            output = super().compute_gradients(x, y)
            output.privacy_event = GaussianEvent(10.0 if self.current_step < 2 else 5.0)
            return output

    register_method(Varying)
    try:
        record = quiet_train(
            TrainConfig.for_method("varying-test", epochs=1, batch_size=100, alignment=False), data=clusters()
        )
    finally:
        unregister_method("varying-test")
    entries = record["privacy"]["ledger"]["entries"]
    assert [(e["event"]["noise_multiplier"], e["count"]) for e in entries] == [
        (10.0, 2),
        (5.0, record["final"]["steps"] - 2),
    ]


def _damaged_last_lines(text: str):
    """Every cut of 1..len-1 bytes of the last line and every single-bit flip of its bytes (newline included)."""
    start = text.rstrip("\n").rfind("\n") + 1
    data = text.encode()
    for cut in range(1, len(data) - start):
        yield f"cut {cut}", data[:-cut]
    for position in range(start, len(data)):
        for bit in range(8):
            yield (
                f"flip byte {position} bit {bit}",
                data[:position] + bytes([data[position] ^ (1 << bit)]) + data[position + 1 :],
            )


def test_a_damaged_last_journal_line_is_charged_or_refused_never_dropped(tmp_path):
    from trainers.run.journal import StepJournal

    journal = StepJournal(tmp_path / "j")
    for step in (40, 41, 42):
        journal.begin(step)
    text = journal.path.read_text()
    for name, damaged in _damaged_last_lines(text):
        journal.path.write_bytes(damaged)
        try:
            assert journal.draws(100) >= 3, name
        except CheckpointError:
            pass  # refused: the run is not resumed, nothing is under-charged
        journal.seal()
        journal.begin(43)  # a resumed run appends after a sealed journal
        try:
            assert journal.draws(100) >= 4, name
        except CheckpointError:
            pass


@pytest.mark.parametrize("damage", ["cut", "flip newline"])
def test_resume_after_a_damaged_last_journal_line_charges_every_draw(device_run, damage):
    """Killed after 7 device draws (5 checkpointed); the journal's last line is damaged: the resumed
    run still charges the 2 draws after the checkpoint (issue 27: 43 drawn, 42 charged)."""
    import json

    tmp_path, common = device_run
    path = tmp_path / "run.ckpt.journal"
    data = path.read_bytes()
    path.write_bytes(data[:-1] if damage == "cut" else data[:-1] + bytes([data[-1] ^ 1]))
    result = _run_cli([*common, "--resume", "--out", str(tmp_path / "r.json")], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "charged 2 step(s)" in result.stderr
    record = json.loads((tmp_path / "r.json").read_text())
    assert _ledger_steps(record) == 18 + 2
