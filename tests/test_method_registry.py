"""One source of truth for methods (the registry) and seeds (one derivation)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from opu_hal.randomness.seeding import derive_seed, stream_seed
from tests.test_data import make_dataset
from tests.training_helpers import clusters
from trainers import cli
from trainers.api import PrivacyEngine, attach_dfa
from trainers.audit.black_box import check_claim
from trainers.audit.white_box import white_box_methods
from trainers.core.errors import TrainingConfigError
from trainers.core.sampling import step_generator
from trainers.distributed.setup import check_method
from trainers.methods import SPECS, Method, StepOutput, get_spec, register_method, unregister_method
from trainers.methods.base import forward_and_error
from trainers.methods.dp_sgd import DPSGD
from trainers.run.config import TrainConfig
from trainers.run.loop import train


class Frozen(Method):
    """A tiny method: computes the loss, sets every gradient to zero (so nothing moves)."""

    name = "frozen-test"
    defaults = {"hidden": (7,), "batch_size": 25}

    def compute_gradients(self, x: torch.Tensor, y: torch.Tensor) -> StepOutput:
        opening = forward_and_error(self.model, x, y)
        for p in self.model.parameters():
            p.grad = torch.zeros_like(p)
        return StepOutput(opening.loss_sum, opening.correct, int(y.shape[0]))


@pytest.fixture
def frozen():
    register_method(Frozen)
    yield Frozen
    unregister_method(Frozen.name)


def test_registered_method_trains_through_train_with_its_defaults(frozen):
    config = TrainConfig.for_method("frozen-test", epochs=2, alignment=False)
    assert config.hidden == (7,) and config.batch_size == 25
    record = train(config, data=clusters(), progress=False, log=lambda m: None)
    assert record["method"] == "frozen-test" and record["final"]["steps"] == 2 * 24
    first, second = (e["train_loss"] for e in record["epochs"])
    assert first == pytest.approx(second, rel=1e-6)  # zero gradients: the model never moved


def test_registered_method_is_a_cli_choice_and_trains_from_the_command_line(frozen, tmp_path, monkeypatch, capsys):
    make_dataset(tmp_path, n_train=100, n_test=20, compress=False)
    monkeypatch.setenv("OPU_HAL_DATA_DIR", str(tmp_path))
    out = tmp_path / "r.json"
    assert (
        cli.main(["train", "--method", "frozen-test", "--epochs", "1", "--quiet", "--no-alignment", "--out", str(out)])
        == 0
    )
    assert json.loads(out.read_text())["hyperparameters"]["hidden"] == [7]


def test_unregistered_method_is_refused_by_config_and_cli(capsys):
    with pytest.raises(TrainingConfigError, match="'frozen-test': choose one of bp, dfa"):
        TrainConfig.for_method("frozen-test")
    with pytest.raises(SystemExit):
        cli.main(["train", "--method", "frozen-test"])
    assert "invalid choice: 'frozen-test'" in capsys.readouterr().err


def test_sigma_flag_is_an_alias_of_software_noise_std():
    parser = cli.hal_cli.build_parser([cli.register_train_commands])
    a = cli.config_from_args(parser.parse_args(["train", "--method", "photonic-dp", "--sigma", "0.05"]))
    b = cli.config_from_args(parser.parse_args(["train", "--method", "photonic-dp", "--software-noise-std", "0.05"]))
    assert a.software_noise_std == b.software_noise_std == 0.05
    assert TrainConfig.for_method("photonic-dp", sigma=0.05).software_noise_std == 0.05


def test_device_streams_and_step_streams_share_one_derivation():
    assert stream_seed(3, "noise") == derive_seed(3, 1)
    expected = torch.Generator().manual_seed(derive_seed(5, "noise", 7))
    assert torch.equal(torch.randn(4, generator=step_generator(5, "noise", 7)), torch.randn(4, generator=expected))
    assert len({derive_seed(0, s, i) for s in ("noise", "batch") for i in range(50)}) == 100


class ToyPrivate(DPSGD):
    """A private method registered by one line: DP-SGD's trainer under another name."""

    name = "toy-private-test"


TWO_RANKS = SimpleNamespace(distributed=True, world_size=2)


def _cli_accepts(name: str) -> bool:
    parser = cli.hal_cli.build_parser([cli.register_train_commands])
    try:
        return parser.parse_args(["train", "--method", name]).method == name
    except SystemExit:
        return False


def _make_private(method: str) -> PrivacyEngine:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 16), nn.Sigmoid(), nn.Linear(16, 10))
    data = clusters(n_train=100, n_test=2).train
    engine = PrivacyEngine()
    engine.make_private(
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        data_loader=(data.x, data.y),
        batch_size=20,
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        method=method,
    )
    return engine


@pytest.fixture
def toy_private():
    register_method(
        ToyPrivate,
        noise_sources=("software",),
        user_update="per-example-clipping",
        distributed_refusal="toy reason: not analysed on ranks",
    )
    yield ToyPrivate
    unregister_method(ToyPrivate.name)


def test_one_registration_reaches_the_cli_the_api_torchrun_and_the_audit(toy_private, capsys):
    name = toy_private.name
    assert _cli_accepts(name)
    engine = _make_private(name)
    assert engine.method == name and engine.data_loader.sample_rate == pytest.approx(0.2)
    with pytest.raises(TrainingConfigError, match="toy reason: not analysed on ranks"):
        check_method(name, TWO_RANKS)
    check_claim(name)
    assert name in white_box_methods()


def test_an_unregistered_method_leaves_every_surface(toy_private, capsys):
    unregister_method(toy_private.name)
    assert not _cli_accepts(toy_private.name)
    with pytest.raises(TrainingConfigError, match="choose one of dp-dfa, dp-sgd"):
        _make_private(toy_private.name)
    with pytest.raises(TrainingConfigError, match="choose one of"):
        check_claim(toy_private.name)
    assert toy_private.name not in white_box_methods()


def test_a_registration_refused_by_make_private_names_its_reason():
    register_method(Frozen, api_refusal="toy refusal: no user update")
    try:
        with pytest.raises(TrainingConfigError, match="not offered by make_private: toy refusal"):
            PrivacyEngine().make_private(
                module=nn.Linear(2, 2),
                optimizer=None,
                data_loader=None,  # type: ignore[arg-type]
                noise_multiplier=1.0,
                max_grad_norm=1.0,
                method=Frozen.name,
            )
        with pytest.raises(TrainingConfigError, match="not private; there is no claim to audit"):
            check_claim(Frozen.name)
    finally:
        unregister_method(Frozen.name)


def test_a_bad_registration_is_refused_naming_the_field():
    with pytest.raises(TrainingConfigError, match="noise_sources \\['camera'\\]: choose from software, device"):
        register_method(ToyPrivate, noise_sources=("camera",))
    with pytest.raises(TrainingConfigError, match="user_update 'ghost'"):
        register_method(ToyPrivate, user_update="ghost")
    with pytest.raises(TrainingConfigError, match="user_update is for private methods"):
        register_method(Frozen, user_update="dfa-clipping")
    with pytest.raises(TrainingConfigError, match="attach_profile is for DFA methods"):
        register_method(ToyPrivate, attach_profile="torch-cpu")
    with pytest.raises(TrainingConfigError, match="already registered"):
        register_method(DPSGD, noise_sources=("software", "device"))
    assert ToyPrivate.name not in SPECS


@pytest.mark.parametrize("name", list(SPECS))
def test_every_registered_method_is_reachable_from_each_surface(name, capsys):
    spec = get_spec(name)
    assert _cli_accepts(name)
    if spec.user_update is not None:
        assert _make_private(name).method == name
    else:
        with pytest.raises(TrainingConfigError, match=spec.api_refusal[:40] if spec.api_refusal else "choose one of"):
            _make_private(name)
    if spec.attach_profile is not None:
        handle = attach_dfa(nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2)), method=name)
        handle.detach()
    if spec.distributed_refusal is not None:
        with pytest.raises(TrainingConfigError, match="cannot run on 2 ranks"):
            check_method(name, TWO_RANKS)
    else:
        check_method(name, TWO_RANKS)
    if spec.trainer.private:
        check_claim(name)
    else:
        with pytest.raises(TrainingConfigError, match="not private"):
            check_claim(name)
    assert (name in white_box_methods()) == spec.trainer.single_release
