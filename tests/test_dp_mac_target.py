"""DP-MAC with learned bounds (paper 003, section 2.4) under ``--target-epsilon``: the planner
charges the pre-training epoch and the DP histograms, so the run trains every epoch and spends
its target; the noise it picks equals the reference of scripts/reproduce/mac_noise.py."""

from __future__ import annotations

import pytest

from scripts.reproduce.mac_noise import mac_noise_multiplier
from tests.training_helpers import clusters
from trainers.run.config import TrainConfig
from trainers.run.loop import train

TARGET = 2.0
EPOCHS = 2
pytestmark = pytest.mark.filterwarnings("ignore::trainers.run.chance.ChanceAccuracyWarning")


@pytest.fixture(scope="module")
def record() -> dict:
    config = TrainConfig.for_method(
        "dp-mac",
        epochs=EPOCHS,
        batch_size=40,
        hidden=(16, 12),
        seed=0,
        inputs="unit",
        features="pixels",
        target_epsilon=TARGET,
        extra={"bounds": "histogram", "z_steps": "1"},
    )
    return train(config, data=clusters(n_train=200), progress=False, log=lambda message: None)


def test_a_target_with_learned_bounds_trains_every_epoch_and_spends_the_target(record: dict) -> None:
    assert not record["privacy"]["stopped_by_budget"]
    assert record["final"]["epochs_completed"] == EPOCHS
    assert 0.95 * TARGET <= record["final"]["epsilon"] <= TARGET


def test_the_planned_noise_matches_the_whole_run_reference(record: dict) -> None:
    train_size = record["dataset"]["train"]
    reference = mac_noise_multiplier(TARGET, 1e-5, train=train_size, batch=40, epochs=EPOCHS)
    assert record["hyperparameters"]["noise_multiplier"] is None  # chosen by the planner, not given
    assert record["privacy"]["noise_multiplier"] == pytest.approx(reference, rel=2e-3)
