"""What a private run publishes outside its released updates is the same on neighbouring datasets
(issue 27): records, log lines and progress bars carry settings, the ledger and held-out metrics only."""

from __future__ import annotations

import json
import re

import pytest
import torch

from tests.training_helpers import clusters
from trainers.core.data import Dataset, Split
from trainers.methods import register_method, unregister_method
from trainers.methods.dp_dfa import DPDFA
from trainers.run.config import TrainConfig
from trainers.run.loop import Trainer, train
from trainers.run.public_surface import epoch_summary, invariant_part, public_record

HIDDEN = (16, 16)


def _replace_one(data: Dataset) -> Dataset:
    """The neighbour that relabels the first training example."""
    y = data.train.y.clone()
    y[0] = (y[0] + 1) % 10
    return Dataset(data.name, Split(data.train.x, y), data.validation, data.test)


def _remove_one(data: Dataset) -> Dataset:
    """The neighbour without the first training example."""
    return Dataset(data.name, Split(data.train.x[1:], data.train.y[1:]), data.validation, data.test)


def _published(config: TrainConfig, data: Dataset) -> tuple[dict, list[str]]:
    lines: list[str] = []
    record = train(config, data=data, progress=False, log=lines.append)
    return record, lines


def _config(method: str, **kw) -> TrainConfig:
    base = dict(
        epochs=2, batch_size=40, hidden=HIDDEN, seed=0, alignment=False, inputs="standardized", features="pixels"
    )
    base.update(kw)
    return TrainConfig.for_method(method, **base)


NEIGHBOURS = [
    ("dp-dfa", {"noise_multiplier": 2.0}, _replace_one),
    ("dp-dfa", {"noise_multiplier": 2.0, "noise_source": "device"}, _replace_one),
    ("dp-sgd", {"noise_multiplier": 2.0, "sampling": "fixed"}, _replace_one),
    ("dp-sgd", {"noise_multiplier": 2.0, "public_dataset_size": 400}, _remove_one),
    ("dp-ulr", {"noise_multiplier": 4.0, "public_dataset_size": 400}, _remove_one),
    ("dp-ulr", {"noise_multiplier": 4.0, "public_dataset_size": 400, "extra": {"mode": "controller"}}, _remove_one),
    ("dp-mac", {"noise_multiplier": 4.0, "public_dataset_size": 400, "extra": {"z_steps": "2"}}, _remove_one),
    ("photonic-dp", {"profile": "torch-cpu", "software_noise_std": 0.05}, _replace_one),
    ("photonic-dp", {"profile": "opu-sim"}, _replace_one),
]


@pytest.mark.parametrize(
    "method, options, neighbour", NEIGHBOURS, ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(NEIGHBOURS)]
)
def test_neighbouring_datasets_publish_the_same_surface(method, options, neighbour):
    """Two runs, one example apart: every published field outside the released metrics and the
    timings is identical, and every log line is either a setting or the public epoch summary."""
    data = clusters(n_train=400, n_test=100)
    config = _config(method, **options)
    record_a, lines_a = _published(config, data)
    record_b, lines_b = _published(config, neighbour(data))
    assert json.dumps(invariant_part(record_a), sort_keys=True) == json.dumps(invariant_part(record_b), sort_keys=True)
    for record, lines in ((record_a, lines_a), (record_b, lines_b)):
        summaries = [epoch_summary(epoch) for epoch in record["epochs"]]
        assert [line for line in lines if line.startswith("epoch")] == summaries
    settings_a = [line for line in lines_a if not line.startswith("epoch") and not chance_warning(line, record_a)]
    settings_b = [line for line in lines_b if not line.startswith("epoch") and not chance_warning(line, record_b)]
    assert settings_a == settings_b


def chance_warning(line: str, record: dict) -> bool:
    """The chance warning: whether it appears, and the accuracy it quotes, are the released model's
    test accuracy on the public split (a released metric, like the epoch summary's), checked here."""
    quoted = re.match(r"warning: [\w-]+: test accuracy ([0-9.]+) is at or below chance", line)
    if quoted is None:
        return False
    assert float(quoted.group(1)) == pytest.approx(record["final"]["test_accuracy"], abs=1e-4)
    return True


def test_a_private_record_holds_no_training_split_statistic():
    record = train(
        _config("dp-dfa", noise_multiplier=2.0),
        data=clusters(n_train=200, n_test=100),
        progress=False,
        log=lambda m: None,
    )
    assert record["epochs"] and all("train_loss" not in e and "train_accuracy" not in e for e in record["epochs"])
    assert record == public_record(record)


def test_non_private_records_keep_their_training_statistics():
    record = train(_config("dfa"), data=clusters(n_train=200, n_test=100), progress=False, log=lambda m: None)
    assert "train_loss" in record["epochs"][0]


class _LeakyDPDFA(DPDFA):
    """A planted bug: the method publishes its batch's un-noised mean loss in ``describe()``."""

    name = "dp-dfa-leaky-test"
    last_loss = 0.0

    def compute_gradients(self, x, y):
        output = super().compute_gradients(x, y)
        self.last_loss = output.loss_sum / max(output.count, 1)
        return output

    def describe(self):
        return {**super().describe(), "batch_loss": self.last_loss}


def test_the_neighbour_check_flags_an_un_noised_training_statistic():
    register_method(_LeakyDPDFA)
    try:
        data = clusters(n_train=400, n_test=100)
        config = _config("dp-dfa-leaky-test", noise_multiplier=2.0)
        a, _ = _published(config, data)
        b, _ = _published(config, _replace_one(data))
    finally:
        unregister_method("dp-dfa-leaky-test")
    assert invariant_part(a)["privacy"]["batch_loss"] != invariant_part(b)["privacy"]["batch_loss"]


def test_add_remove_with_a_public_size_publishes_it_and_not_the_true_size():
    data = clusters(n_train=380, n_test=100)
    record = train(
        _config("dp-sgd", noise_multiplier=2.0, public_dataset_size=400), data=data, progress=False, log=lambda m: None
    )
    assert record["dataset"]["train"] == 400
    assert "declared public bound" in record["privacy"]["dataset_size"]
    assert record["sampling"]["steps_per_epoch"] == 400 // 40


def test_add_remove_without_a_public_size_states_the_convention():
    record = train(
        _config("dp-sgd", noise_multiplier=2.0),
        data=clusters(n_train=380, n_test=100),
        progress=False,
        log=lambda m: None,
    )
    assert record["dataset"]["train"] == 380 and "public by convention" in record["privacy"]["dataset_size"]


def test_a_public_size_is_refused_under_replace_one():
    from trainers.core.errors import TrainingConfigError

    with pytest.raises(TrainingConfigError, match="replace-one"):
        Trainer(
            _config("dp-dfa", noise_multiplier=2.0, public_dataset_size=400),
            data=clusters(n_train=400),
            progress=False,
            log=lambda m: None,
        )


def test_private_standardization_reads_the_public_test_split_not_the_training_split():
    data = clusters(n_train=400, n_test=100)
    shifted = Dataset(data.name, Split(data.train.x + 5.0, data.train.y), data.validation, data.test)
    config = _config("dp-dfa", noise_multiplier=2.0)
    trainers = [Trainer(config, data=d, progress=False, log=lambda m: None) for d in (data, shifted)]
    try:
        assert torch.equal(trainers[0].data.test.x, trainers[1].data.test.x)  # same scaling constants
    finally:
        for trainer in trainers:
            trainer.close()


def test_account_states_that_the_dataset_size_it_uses_is_treated_as_public(capsys):
    from opu_hal.cli import main

    assert (
        main(["account", "--dataset-size", "1000", "--batch-size", "100", "--steps", "10", "--noise-multiplier", "1.0"])
        == 0
    )
    assert "--dataset-size 1000: treated as public" in capsys.readouterr().out
