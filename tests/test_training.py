"""The training core and the non-private DFA family (paper 000, eq. 4; section 4)."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from tests.training_helpers import clusters, simulated_device, torch_device
from trainers.cli.plot import plot_records
from trainers.core.errors import TrainingConfigError
from trainers.core.feedback import ternarize
from trainers.core.model import ACTIVATIONS, MLP
from trainers.methods import METHODS, MethodContext
from trainers.run.alignment import gradient_alignment
from trainers.run.config import TrainConfig
from trainers.run.loop import train

HIDDEN = (24, 24)


def config(method: str, **kw) -> TrainConfig:
    base = dict(epochs=3, batch_size=32, hidden=HIDDEN, seed=0, lr=0.05)
    base.update(kw)
    return TrainConfig.for_method(method, **base)


def quiet_train(cfg: TrainConfig, **kw):
    return train(cfg, progress=False, log=lambda message: None, **kw)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_derivative_matches_autograd(name):
    act = ACTIVATIONS[name]
    z = torch.linspace(-3, 3, 101, dtype=torch.float64).requires_grad_()
    (grad,) = torch.autograd.grad(act.fn(z).sum(), z)
    assert torch.allclose(act.derivative(z.detach()), grad)
    assert grad.abs().max() <= act.gamma_max + 1e-12


def test_forward_trace_keeps_layer_inputs_and_preactivations():
    model = MLP([20, 8, 6, 10], seed=1)
    x = torch.randn(5, 20)
    trace = model.forward_trace(x)
    assert torch.equal(trace.logits, model(x))
    assert [t.shape[1] for t in trace.inputs] == [20, 8, 6]
    assert torch.allclose(trace.inputs[1], torch.tanh(trace.preacts[0]))


def test_dfa_update_is_projected_error_times_derivative_times_input():
    """Paper 000 eq. 4: dW^l = ((B^{l+1} e) * phi'(z^l)) h^{l-1 T} / m, on a noiseless device."""
    device = torch_device(out_features=sum(HIDDEN))
    model = MLP([20, *HIDDEN, 10], seed=0)
    data = clusters()
    ctx = MethodContext(config("dfa"), device, 20, 10, len(data.train))
    method = METHODS["dfa"](model, ctx)
    x, y = data.train.x[:16], data.train.y[:16]
    method.compute_gradients(x, y)
    trace = model.forward_trace(x)
    e = torch.softmax(trace.logits, 1) - F.one_hot(y, 10)
    projected = e @ device.matrix
    first = (projected[:, : HIDDEN[0]] * (1 - torch.tanh(trace.preacts[0]) ** 2)).T @ x / 16
    assert torch.allclose(model.layers[0].weight.grad, first, atol=1e-6)
    assert torch.allclose(model.layers[-1].weight.grad, e.T @ trace.inputs[-1] / 16, atol=1e-6)


def test_ternarize_thresholds_at_t():
    e = torch.tensor([[-0.5, -0.1, 0.0, 0.15, 0.16]])
    assert ternarize(e, 0.15).tolist() == [[-1.0, 0.0, 0.0, 0.0, 1.0]]


def test_device_too_small_names_the_profile_size_needed():
    model = MLP([20, *HIDDEN, 10])
    ctx = MethodContext(config("dfa"), torch_device(out_features=30), 20, 10, 100)
    with pytest.raises(TrainingConfigError, match="out_features = 48"):
        METHODS["dfa"](model, ctx)


def test_dfa_refuses_a_binary_device_and_pdfa_refuses_a_real_one():
    model = MLP([20, *HIDDEN, 10])
    with pytest.raises(TrainingConfigError, match="pdfa"):
        METHODS["dfa"](model, MethodContext(config("dfa"), simulated_device(), 20, 10, 100))
    with pytest.raises(TrainingConfigError, match="binary-input"):
        METHODS["pdfa"](model, MethodContext(config("pdfa"), torch_device(), 20, 10, 100))


def test_bp_alignment_with_itself_is_one():
    model = MLP([20, *HIDDEN, 10])
    data = clusters()
    method = METHODS["bp"](model, MethodContext(config("bp"), None, 20, 10, 600))
    cosines = gradient_alignment(method, data.train.x[:64], data.train.y[:64])
    assert all(c == pytest.approx(1.0, abs=1e-5) for c in cosines.values())


@pytest.mark.parametrize(
    "method,device_fn",
    [
        ("bp", None),
        ("dfa", torch_device),
        ("tdfa", torch_device),
        ("pdfa", simulated_device),
    ],
)
def test_every_method_learns_separable_clusters(method, device_fn):
    device = device_fn() if device_fn else None
    record = quiet_train(config(method, epochs=4), data=clusters(), device=device)
    assert record["final"]["test_accuracy"] > 0.85, record["epochs"][-1]


def test_record_holds_the_promised_keys(tmp_path):
    out = tmp_path / "run.json"
    quiet_train(config("pdfa", epochs=2), data=clusters(), device=simulated_device(), out=out)
    record = json.loads(out.read_text())
    final = record["final"]
    assert 0 <= final["test_accuracy"] <= 1 and final["wall_time_s"] > 0
    assert record["method"] == "pdfa" and record["dataset"]["name"] == "clusters"
    assert record["hyperparameters"]["batch_size"] == 32
    assert len(record["epochs"]) == 2
    assert set(record["epochs"][0]["alignment"]) == {"layer1", "layer2", "output"}
    seen = record["noise_reports"][0]
    assert seen["operating_point"]["source"] == "declared" and seen["operating_point"]["passes"] == 2
    assert seen["count"] > 0


def test_dfa_hidden_layers_align_with_backprop_after_training():
    record = quiet_train(config("dfa", epochs=4), data=clusters(), device=torch_device())
    assert record["epochs"][-1]["alignment"]["layer2"] > 0.2


def test_same_seed_same_run():
    runs = [quiet_train(config("tdfa"), data=clusters(), device=torch_device()) for _ in range(2)]
    assert [e["train_loss"] for e in runs[0]["epochs"]] == [e["train_loss"] for e in runs[1]["epochs"]]


def test_bad_settings_name_the_option():
    with pytest.raises(TrainingConfigError, match="--momentum"):
        TrainConfig.for_method("dfa", momentum=1.5)
    with pytest.raises(TrainingConfigError, match="--method"):
        TrainConfig.for_method("dfb")
    with pytest.raises(TrainingConfigError, match="--target-epsilon"):
        TrainConfig.for_method("dp-dfa")


def test_plot_writes_a_png(tmp_path):
    out = tmp_path / "run.json"
    quiet_train(config("bp", epochs=2), data=clusters(), out=out)
    png = plot_records([str(out)], str(tmp_path / "curves.png"), n_classes=10)  # clusters: no named class count
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(TrainingConfigError, match="no per-epoch"):
        plot_records([str(out)], str(tmp_path / "x.png"), metric="nothing")


@pytest.mark.parametrize("option", [{"target_epsilon": 3.0}, {"noise_multiplier": 1.0}, {"noise_source": "device"}])
def test_privacy_options_on_a_non_private_method_are_refused(option):
    from trainers.core.errors import TrainingConfigError
    from trainers.run.config import TrainConfig

    with pytest.raises(TrainingConfigError, match="not private"):
        TrainConfig.for_method("dfa", **option)


def test_trainer_closes_the_device_it_opened_and_leaves_a_given_one_open():
    from trainers.run.loop import Trainer

    quiet = dict(data=clusters(), progress=False, log=lambda m: None)
    with Trainer(config("dfa", epochs=1, profile="torch-cpu", alignment=False), **quiet) as trainer:
        opened = trainer.device
        trainer.run()
        assert not opened.closed
    assert opened.closed
    given = torch_device()
    train(config("dfa", epochs=1, alignment=False), device=given, **quiet)
    assert not given.closed
    assert given.project(torch.zeros(1, given.in_features)).values.shape == (1, given.out_features)


def test_callbacks_see_every_step_after_it_is_accounted():
    from trainers.run.loop import Callback

    class Spy(Callback):
        seen: list[tuple[int, int]] = []  # noqa: RUF012 (a class made for this one test)

        def after_step(self, trainer):
            self.seen.append((trainer.global_step, trainer.accountant.steps))

    spy = Spy()
    record = train(
        config("dp-dfa", epochs=1, noise_multiplier=1.0, alignment=False),
        data=clusters(),
        progress=False,
        log=lambda m: None,
        callbacks=[spy],
    )
    steps = record["final"]["steps"]
    assert spy.seen == [(k, k) for k in range(1, steps + 1)]
