"""PrivacyEngine.make_private on a user's model and data (trainers.api.engine)."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from opu_hal.privacy import Accountant, FixedSizeGaussianEvent, PoissonGaussianEvent
from opu_hal.privacy.mechanisms import GaussianRelease
from tests.training_helpers import clusters, private_dfa_on_device, train_own_model
from trainers.api import PrivacyBudgetExhausted, PrivacyEngine, UnsupportedModelError
from trainers.core.errors import TrainingConfigError
from trainers.core.model import MLP
from trainers.methods import DPDFA
from trainers.methods.base import MethodContext
from trainers.run.config import TrainConfig


def _data(n: int = 200):
    data = clusters(n_train=n, n_test=2)
    return data.train.x, data.train.y


def _mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(20, 16), nn.Sigmoid(), nn.Linear(16, 10))


def _private(engine: PrivacyEngine, model: nn.Module, data_loader, how: str = "make_private", **options):
    """``engine.<how>`` (make_private or make_private_with_epsilon) of ``model`` with SGD at lr 0.1."""
    return getattr(engine, how)(
        module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), data_loader=data_loader, **options
    )


def test_dp_sgd_epsilon_equals_the_accountants_for_the_same_rate_noise_and_steps():
    x, y = _data()
    model = _mlp()
    engine = PrivacyEngine()
    model, optimizer, loader = _private(
        engine, model, DataLoader(TensorDataset(x, y), batch_size=20), noise_multiplier=1.3, max_grad_norm=1.0
    )
    steps = train_own_model(loader, model, optimizer, epochs=2)
    assert steps == 20 == engine.steps
    reference = Accountant("add_remove")
    reference.step(PoissonGaussianEvent(20 / 200, 1.3), 20)
    assert engine.get_epsilon(1e-5) == pytest.approx(reference.get_epsilon(1e-5), rel=1e-12)


def test_wrapped_optimizer_noise_std_is_z_times_clip_norm():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(200, 100))
    x, y = torch.randn(100, 200), torch.randint(0, 100, (100,))
    engine = PrivacyEngine()
    z, clip, m = 0.8, 2.5, 10
    model, optimizer, loader = engine.make_private(
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.0),
        data_loader=(x, y),
        batch_size=m,
        noise_multiplier=z,
        max_grad_norm=clip,
    )
    assert optimizer.noise_std == pytest.approx(z * clip)
    xb, _ = next(iter(loader))
    (0 * model(xb).sum()).backward()  # zero per-example gradients: .grad is the noise alone
    optimizer.step()
    noise = torch.cat([p.grad.flatten() for p in model.parameters()]) * m  # divided by the expected batch q N = m
    assert float(noise.std()) == pytest.approx(z * clip, rel=0.03)
    assert abs(float(noise.mean())) < 0.03 * z * clip


def test_dp_sgd_clips_each_example_to_the_norm():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(5, 3))
    x, y = torch.randn(40, 5) * 10, torch.randint(0, 3, (40,))
    engine = PrivacyEngine()
    model, optimizer, _loader = engine.make_private(
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.0),
        data_loader=(x, y),
        batch_size=4,
        noise_multiplier=1.0,
        max_grad_norm=0.5,
    )
    F.cross_entropy(model(x[:1]), y[:1]).backward()
    clipped = optimizer.update.clipped()
    assert float(clipped.norm()) == pytest.approx(0.5, rel=1e-5)  # one example, gradient norm >> 0.5


def test_dp_dfa_update_before_noise_equals_the_builtin_method_and_so_does_the_sensitivity():
    x, y = _data(64)
    mlp = MLP([20, 16, 10], activation="sigmoid", seed=2)
    user = nn.Sequential(nn.Linear(20, 16), nn.Sigmoid(), nn.Linear(16, 10))
    user[0].load_state_dict(mlp.layers[0].state_dict())
    user[2].load_state_dict(mlp.layers[1].state_dict())
    config = TrainConfig(method="dp-dfa", batch_size=16, hidden=(16,), activation="sigmoid")
    builtin = DPDFA(mlp, MethodContext(config, None, 20, 10, 64))
    builtin.set_noise_multiplier(1.0)
    builtin.mechanism = GaussianRelease(0.0)  # no noise: compare the clipped updates
    engine = PrivacyEngine()
    user, optimizer, loader = _private(
        engine,
        user,
        (x, y),
        batch_size=16,
        noise_multiplier=1.0,
        max_grad_norm=config.tau_e,
        method="dp-dfa",
        tau_h=config.tau_h,
        beta=config.beta,
        feedback_seed=config.seed,
    )
    xb, yb = next(iter(loader))  # the step releases the batch the private loader drew
    builtin.compute_gradients(xb, yb)
    F.cross_entropy(user(xb), yb).backward()
    assert all(p.grad is None for p in user.parameters())  # nothing un-noised reaches .grad
    ours = optimizer.update.clipped()
    theirs = torch.cat([p.grad.flatten() for layer in mlp.layers for p in (layer.weight, layer.bias)])
    assert torch.allclose(ours, theirs, atol=1e-7)
    assert optimizer.update.sensitivity == pytest.approx(builtin.sensitivity, rel=1e-12)
    optimizer.step()
    assert engine.get_epsilon(1e-5) == pytest.approx(_epsilon(FixedSizeGaussianEvent(64, 16, 1.0), "replace_one"))


def _epsilon(event, neighboring: str, steps: int = 1) -> float:
    accountant = Accountant(neighboring)
    accountant.step(event, steps)
    return accountant.get_epsilon(1e-5)


def test_dp_dfa_with_device_noise_is_charged_the_lattice_event():
    x, y = _data(64)
    model = _mlp()
    engine = PrivacyEngine()
    model, optimizer, loader = private_dfa_on_device(engine, model, (x, y), "opu-sim-dp")
    assert train_own_model(loader, model, optimizer) == 4
    assert engine.optimizer.mechanism.mechanism == "skellam"
    event = optimizer.mechanism.lattice.event(64, 16, 2.0)
    assert engine.get_epsilon(1e-5) == pytest.approx(_epsilon(event, "replace_one", 4))


def test_budget_stop_ends_training_before_the_target_is_crossed():
    x, y = _data()
    model = _mlp()
    engine = PrivacyEngine()
    model, optimizer, loader = _private(
        engine,
        model,
        TensorDataset(x, y),
        batch_size=20,
        noise_multiplier=2.0,
        max_grad_norm=1.0,
        target_epsilon=2.0,
        target_delta=1e-5,
    )
    steps = train_own_model(loader, model, optimizer, epochs=50)
    assert engine.stopped_by_budget and 0 < steps < 500
    assert engine.get_epsilon(1e-5) <= 2.0
    assert optimizer.accountant.epsilon_after(optimizer.event, 1, 1e-5) > 2.0
    with pytest.raises(PrivacyBudgetExhausted):
        optimizer.step()


def _wrap(engine: PrivacyEngine, how: str, **options):
    """``engine.<how>`` (make_private or make_private_with_epsilon) of a fresh MLP on :func:`_data`, batches of 20."""
    return _private(engine, _mlp(), _data(), how, batch_size=20, **options)


def test_make_private_with_epsilon_spends_about_the_target_in_the_planned_epochs():
    engine = PrivacyEngine()
    model, optimizer, loader = _wrap(
        engine,
        "make_private_with_epsilon",
        target_epsilon=3.0,
        target_delta=1e-5,
        epochs=3,
        max_grad_norm=1.0,
        method="dp-dfa",
    )
    assert train_own_model(loader, model, optimizer, epochs=3) == 30
    assert 2.9 < engine.get_epsilon(1e-5) <= 3.0
    assert not engine.stopped_by_budget


def test_state_dict_round_trips_accountant_sampling_and_noise():
    x, y = _data()  # the same tensors _wrap trains on (clusters() is seeded)
    engine = PrivacyEngine()
    model, optimizer, loader = _wrap(engine, "make_private", noise_multiplier=1.0, max_grad_norm=1.0)
    train_own_model(loader, model, optimizer)
    state, model_state = engine.state_dict(), copy.deepcopy(model.state_dict())
    opt_state = copy.deepcopy(optimizer.state_dict())
    assert len(state["loader"]["secret_key"]) * 4 >= 128
    twin = _mlp()
    twin.load_state_dict(model_state)
    engine2 = PrivacyEngine()
    twin, optimizer2, loader2 = _private(engine2, twin, (x, y), batch_size=20, noise_multiplier=1.0, max_grad_norm=1.0)
    engine2.load_state_dict(state)
    optimizer2.load_state_dict(opt_state)
    assert engine2.get_epsilon(1e-5) == engine.get_epsilon(1e-5)
    train_own_model(loader, model, optimizer)
    train_own_model(loader2, twin, optimizer2)
    for a, b in zip(model.parameters(), twin.parameters()):
        assert torch.equal(a, b)  # same batches, same noise
    assert engine2.get_epsilon(1e-5) == engine.get_epsilon(1e-5)


def test_dp_sgd_refuses_trainable_layers_it_cannot_clip_naming_them():
    model = nn.Sequential(nn.Linear(4, 8), nn.PReLU(), nn.Linear(8, 3))
    with pytest.raises(UnsupportedModelError, match=r"'1' \(PReLU\): no per-example gradient rule"):
        _private(
            PrivacyEngine(),
            model,
            (torch.randn(10, 4), torch.zeros(10, dtype=torch.long)),
            batch_size=2,
            noise_multiplier=1.0,
            max_grad_norm=1.0,
        )


def test_a_declared_public_dataset_size_sets_the_rate_the_steps_and_the_accounting():
    x, y = _data(200)
    model = _mlp()
    engine = PrivacyEngine()
    model, optimizer, loader = _private(
        engine, model, (x, y), batch_size=20, noise_multiplier=1.3, max_grad_norm=1.0, public_dataset_size=400
    )
    assert len(loader) == 20 and loader.sample_rate == pytest.approx(0.05)
    train_own_model(loader, model, optimizer)
    assert engine.get_epsilon(1e-5) == pytest.approx(_epsilon(PoissonGaussianEvent(0.05, 1.3), "add_remove", 20))


@pytest.mark.parametrize("method, reason", [("dp-ulr", "likelihood-ratio"), ("dp-mac", "auxiliary coordinates")])
def test_dp_ulr_and_dp_mac_are_refused_by_make_private_with_the_reason(method, reason):
    x, y = _data()
    model = _mlp()
    with pytest.raises(TrainingConfigError, match=rf"{method}.*not offered by make_private.*{reason}"):
        _private(PrivacyEngine(), model, (x, y), batch_size=32, noise_multiplier=1.0, max_grad_norm=1.0, method=method)


@pytest.mark.parametrize("method", ["dp-ulr", "dp-mac"])
def test_the_refusals_suggested_path_trains_the_method_on_a_users_tensors(method):
    from trainers.run.loop import train

    data = clusters(n_train=256, n_test=64)
    config = TrainConfig.for_method(
        method,
        features="pixels",
        target_epsilon=8.0,
        epochs=1,
        batch_size=64,
        hidden=(16,),
        inputs="unit",
        alignment=False,
    )
    record = train(config, data=data, progress=False, log=lambda message: None)
    assert record["final"]["steps"] > 0 and 0 < record["final"]["epsilon"] <= 8.0


def test_dp_dfa_refuses_an_unnamed_conv_prefix_naming_the_conv_and_the_layers_that_train_it():
    model = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.Tanh(), nn.Flatten(), nn.Linear(40, 10))
    x, y = torch.rand(64, 1, 4, 5), torch.randint(0, 10, (64,))
    with pytest.raises(UnsupportedModelError, match=r"layer '0' \(Conv2d\).*pass layers="):
        _private(
            PrivacyEngine(), model, (x, y), batch_size=16, noise_multiplier=1.0, max_grad_norm=1.0, method="dp-dfa"
        )


def test_a_pld_engine_accounts_like_a_pld_ledger_and_plans_less_noise():
    x, y = _data()
    loader = DataLoader(TensorDataset(x, y), batch_size=20)
    engine = PrivacyEngine(accountant="pld")
    model = _mlp()
    model, optimizer, loader = _private(engine, model, loader, noise_multiplier=1.3, max_grad_norm=1.0)
    train_own_model(loader, model, optimizer, epochs=2)
    reference = Accountant("add_remove", conversion="pld")
    reference.step(PoissonGaussianEvent(20 / 200, 1.3), 20)
    assert engine.get_epsilon(1e-5) == pytest.approx(reference.get_epsilon(1e-5), rel=1e-12)
    planned = {}
    for kind in ("rdp", "pld"):
        model = _mlp()
        engine = PrivacyEngine(accountant=kind)
        _private(
            engine,
            model,
            DataLoader(TensorDataset(x, y), batch_size=20),
            "make_private_with_epsilon",
            target_epsilon=2.0,
            target_delta=1e-5,
            epochs=2,
            max_grad_norm=1.0,
        )
        planned[kind] = engine.noise_multiplier
    assert planned["pld"] < 0.97 * planned["rdp"]


def test_a_pld_engine_refuses_events_the_pld_does_not_cover():
    x, y = _data()
    model = _mlp()
    with pytest.raises(TrainingConfigError, match="accountant='pld'.*--accounting rdp"):
        _private(
            PrivacyEngine(accountant="pld"),
            model,
            DataLoader(TensorDataset(x, y), batch_size=20),
            noise_multiplier=1.0,
            max_grad_norm=1.0,
            method="dp-dfa",
        )
    with pytest.raises(TrainingConfigError, match="choose 'rdp' or 'pld'"):
        PrivacyEngine(accountant="prv")
