"""One source of truth for methods (the registry) and seeds (one derivation)."""

from __future__ import annotations

import json

import pytest
import torch

from opu_hal.randomness.seeding import derive_seed, stream_seed
from trainers import cli
from trainers.run.config import TrainConfig
from trainers.core.errors import TrainingConfigError
from trainers.run.loop import train
from trainers.methods import Method, StepOutput, register_method, unregister_method
from trainers.methods.base import forward_and_error
from trainers.core.sampling import step_generator

from tests.test_data import make_dataset
from tests.training_helpers import clusters


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
    assert cli.main(["train", "--method", "frozen-test", "--epochs", "1", "--quiet", "--no-alignment",
                     "--out", str(out)]) == 0
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
    b = cli.config_from_args(parser.parse_args(["train", "--method", "photonic-dp",
                                                "--software-noise-std", "0.05"]))
    assert a.software_noise_std == b.software_noise_std == 0.05
    assert TrainConfig.for_method("photonic-dp", sigma=0.05).software_noise_std == 0.05


def test_device_streams_and_step_streams_share_one_derivation():
    assert stream_seed(3, "noise") == derive_seed(3, 1)
    expected = torch.Generator().manual_seed(derive_seed(5, "noise", 7))
    assert torch.equal(torch.randn(4, generator=step_generator(5, "noise", 7)), torch.randn(4, generator=expected))
    assert len({derive_seed(0, s, i) for s in ("noise", "batch") for i in range(50)}) == 100
