"""Post-processing of the iterates: the cosine learning-rate schedule and the weight average
(trainers.core.averaging), in the loop, its record and its checkpoints."""

from __future__ import annotations

import math

import pytest
import torch

from tests.training_helpers import clusters, interrupted_and_uninterrupted
from trainers.core.averaging import WeightAverage, make_schedule
from trainers.core.errors import TrainingConfigError
from trainers.run.config import TrainConfig
from trainers.run.loop import Trainer, train


def quiet_train(config: TrainConfig, **kw):
    return train(config, progress=False, log=lambda message: None, **kw)


def test_cosine_schedule_decays_from_the_learning_rate_to_zero_at_the_planned_step():
    weight = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([weight], lr=0.4)
    schedule = make_schedule("cosine", optimizer, total_steps=10)
    seen = []
    for _ in range(10):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    assert seen[0] == pytest.approx(0.4) and seen[5] == pytest.approx(0.2)
    assert seen[9] == pytest.approx(0.4 * 0.5 * (1 + math.cos(math.pi * 0.9)))
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.0, abs=1e-12)
    assert all(a > b for a, b in zip(seen, seen[1:]))


def learning_rates(kind: str, lr: float, steps: int, steps_per_epoch: int) -> list[float]:
    """The learning rate ``make_schedule(kind)`` gives each of ``steps`` optimizer steps."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)
    schedule = make_schedule(kind, optimizer, total_steps=steps, steps_per_epoch=steps_per_epoch)
    seen = []
    for _ in range(steps):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    return seen


def test_decay_schedule_multiplies_the_learning_rate_by_0_9_after_each_epoch():
    assert learning_rates("decay-0.9", 0.4, 12, 4) == pytest.approx([0.4] * 4 + [0.36] * 4 + [0.324] * 4)


def test_paper004s_schedule_multiplies_the_learning_rate_by_0_85_after_every_10_epochs():
    expected = [0.01] * 20 + [0.0085] * 20 + [0.007225] * 10
    assert learning_rates("decay-0.85-per-10", 0.01, 50, 2) == pytest.approx(expected)


def test_weight_average_is_the_warmed_up_exponential_average_and_leaves_the_live_weights_alone():
    model = torch.nn.Linear(3, 2)
    average = WeightAverage(model, decay=0.9)
    expected = model.weight.detach().clone()
    for t in range(1, 30):
        with torch.no_grad():
            model.weight.add_(1.0)
        average.update(model)
        decay = min(0.9, (1 + t) / (10 + t))
        expected = decay * expected + (1 - decay) * model.weight.detach()
    live = model.weight.detach().clone()
    with average.applied(model):
        assert torch.allclose(model.weight, expected, atol=1e-5)
        assert not torch.allclose(model.weight, live)
    assert torch.equal(model.weight, live)


def test_bad_schedule_or_decay_is_refused_naming_the_flag():
    with pytest.raises(TrainingConfigError, match="--lr-schedule"):
        TrainConfig.for_method("dfa", lr_schedule="step")
    with pytest.raises(TrainingConfigError, match=r"--weight-average must be 0 \(off\) or in \(0, 1\)"):
        TrainConfig.for_method("dfa", weight_average=1.0)


def private_config(**kw) -> TrainConfig:
    base = dict(
        epochs=2,
        batch_size=20,
        hidden=(16,),
        seed=0,
        noise_multiplier=1.0,
        alignment=False,
        lr_schedule="cosine",
        weight_average=0.8,
    )
    base.update(kw)
    return TrainConfig.for_method("dp-sgd", **base)


def test_the_record_evaluates_the_averaged_weights():
    data = clusters(n_train=400)
    trainer = Trainer(private_config(), data=data, progress=False, log=lambda m: None)
    with trainer:
        record = trainer.run()
        from trainers.core.evaluation import evaluate

        with trainer.average.applied(trainer.model):
            _, averaged = evaluate(trainer.model, trainer.data.test)
        assert record["final"]["test_accuracy"] == averaged
        assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(0.0, abs=1e-12)


def test_resume_restores_the_schedule_and_the_average(tmp_path):
    data = clusters(n_train=400)
    resumed, full = interrupted_and_uninterrupted(private_config, data, tmp_path)
    assert resumed["epochs"][-1]["test_loss"] == pytest.approx(full["epochs"][-1]["test_loss"], rel=1e-9)
    assert resumed["final"]["test_accuracy"] == full["final"]["test_accuracy"]
