"""The private methods' defaults learn, and a run that ends at chance says so (trainers.methods.private_defaults)."""

from __future__ import annotations

import re
import warnings

import pytest
import torch

from tests.training_helpers import clusters
from trainers.core.data import Dataset, Split
from trainers.run.chance import ChanceAccuracyWarning, chance_note
from trainers.run.config import TrainConfig
from trainers.run.loop import train

QUIET = dict(progress=False, log=lambda message: None)


@pytest.mark.parametrize("method", ["dp-dfa", "dp-sgd"])
def test_the_private_defaults_are_the_measured_ones(method):
    config = TrainConfig.for_method(method, target_epsilon=3.0)
    resolved = (config.optimizer, config.lr, config.hidden, config.activation, config.batch_size, config.inputs)
    assert resolved == ("adam", 1e-2 if method == "dp-dfa" else 3e-3, (128, 256), "tanh", 1024, "unit")
    if method == "dp-dfa":
        assert (config.tau_e, config.tau_h, config.beta) == (0.05, 5.0, 0.9)
    else:
        assert config.clip_norm == 1.0


@pytest.mark.parametrize("method", ["dp-dfa", "dp-sgd"])
def test_the_private_defaults_learn_clusters_in_two_epochs(method):
    # The earlier defaults (sigmoid, Adam 1e-3, batches of 128) end at chance here (0.04 to 0.17).
    data = clusters(n_train=6000, n_test=500, spread=1.0)
    config = TrainConfig.for_method(method, noise_multiplier=1.0, epochs=2, alignment=False, compute="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ChanceAccuracyWarning)
        record = train(config, data=data, **QUIET)
    assert record["final"]["test_accuracy"] > 0.5  # chance: 0.1


def test_chance_is_within_the_margin_above_one_over_the_classes():
    assert "at or below chance (1/10 = 0.1000)" in chance_note(0.1, 10, "dp-sgd", private=True)
    assert chance_note(0.119, 10, "dp-sgd", private=True) is not None
    assert chance_note(0.121, 10, "dp-sgd", private=True) is None
    assert chance_note(float("nan"), 10, "dfa", private=False) is None


def test_a_run_that_learns_nothing_warns_and_logs_it():
    n = 2050  # a multiple of the classes: a constant prediction scores exactly 0.1 whichever class it picks
    zeros = Split(torch.zeros(n, 20), torch.arange(n) % 10)  # no signal: a constant prediction
    data = Dataset("blank", zeros, Split(torch.zeros(100, 20), torch.arange(100) % 10), zeros, classes=10)
    config = TrainConfig.for_method("dp-sgd", noise_multiplier=1.0, epochs=1, alignment=False, compute="cpu")
    lines: list[str] = []
    with pytest.warns(ChanceAccuracyWarning, match="learned nothing"):
        train(config, data=data, progress=False, log=lines.append)
    assert any(re.match(r"warning: dp-sgd: test accuracy 0\.10\d+ is at or below chance", line) for line in lines)
