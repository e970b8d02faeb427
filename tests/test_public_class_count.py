"""The class count is public (issue 44, item 1): the model's output width, the device lattice's
dimension and the sensitivity come from a declared count or the public test split, never from the
private training labels, so a neighbour holding the only example of the top label publishes the same
(on c8dae4e the widths were 10 and 9, the lattice dimensions 1210 and 1193 here)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from tests.training_helpers import clusters
from trainers.core.data import Dataset, DatasetError, Split, load_digits_dataset
from trainers.core.errors import TrainingConfigError
from trainers.run.config import TrainConfig
from trainers.run.loop import Trainer
from trainers.run.public_surface import invariant_part

TOP = 9  # the top label; only the first training example holds it


def _top_label_once() -> Dataset:
    """400 digits (the registry declares 10 classes) whose training split holds label 9 once
    (example 0) and whose held-out splits hold none: the largest label seen in them is 8."""
    data = load_digits_dataset()
    y = data.train.y[:400].clone()
    y[y == TOP] = 0
    y[0] = TOP
    held_out = lambda s: Split(s.x[s.y != TOP], s.y[s.y != TOP])  # noqa: E731
    return replace(
        data, train=Split(data.train.x[:400], y), validation=held_out(data.validation), test=held_out(data.test)
    )


def _relabelled(data: Dataset) -> Dataset:
    """Replace-one neighbour: the only top-label example gets label 0."""
    y = data.train.y.clone()
    y[0] = 0
    return replace(data, train=Split(data.train.x, y))


def _removed(data: Dataset) -> Dataset:
    """Add/remove neighbour: without the only top-label example."""
    return replace(data, train=Split(data.train.x[1:], data.train.y[1:]))


def _run(config: TrainConfig, data: Dataset) -> tuple[dict, int]:
    """The public record and the trained model's output width."""
    with Trainer(config, data=data, progress=False, log=lambda m: None) as trainer:
        record = trainer.run()
        width = [m for m in trainer.model.modules() if isinstance(m, torch.nn.Linear)][-1].out_features
    return record, width


CASES = [
    ("dp-dfa", {"noise_multiplier": 2.0, "noise_source": "device"}, _relabelled),
    ("dp-dfa", {"noise_multiplier": 2.0}, _relabelled),
    ("dp-sgd", {"noise_multiplier": 2.0, "public_dataset_size": 400}, _removed),
]


@pytest.mark.parametrize("method, options, neighbour", CASES, ids=["dp-dfa-device", "dp-dfa-software", "dp-sgd-remove"])
def test_a_neighbour_without_the_top_label_publishes_the_same_widths(method, options, neighbour):
    config = TrainConfig.for_method(
        method, epochs=1, batch_size=40, hidden=(16,), seed=0, alignment=False, inputs="unit", **options
    )
    data = _top_label_once()
    record_a, width_a = _run(config, data)
    record_b, width_b = _run(config, neighbour(data))
    assert width_a == width_b == 10
    assert json.dumps(invariant_part(record_a), sort_keys=True) == json.dumps(invariant_part(record_b), sort_keys=True)
    if options.get("noise_source") == "device":
        lattice_a, lattice_b = record_a["privacy"]["lattice"], record_b["privacy"]["lattice"]
        assert lattice_a["dimension"] == lattice_b["dimension"]
        assert lattice_a["l1_sensitivity"] == lattice_b["l1_sensitivity"]


def test_a_declared_class_count_sets_the_output_width():
    config = TrainConfig.for_method(
        "dp-sgd", epochs=1, batch_size=40, hidden=(16,), noise_multiplier=2.0, n_classes=12, alignment=False
    )
    with Trainer(config, data=clusters(n_train=200, n_test=50), progress=False, log=lambda m: None) as trainer:
        assert trainer.model.layers[-1].out_features == 12


def test_the_registry_declares_the_class_count_of_a_named_dataset():
    data = load_digits_dataset()
    cut = Dataset(
        data.name,
        Split(data.train.x, torch.clamp(data.train.y, max=3)),
        data.validation,
        Split(data.test.x[:0], data.test.y[:0]),
        data.classes,
    )
    assert cut.n_classes == 10  # neither the training labels (max 3) nor the (empty) test split


@pytest.mark.parametrize("declared, label", [(5, 7), (None, -1)])
def test_labels_outside_the_public_classes_are_refused_before_any_spend(declared, label):
    data = clusters(n_train=200, n_test=50)
    y = torch.where(data.train.y >= 5, torch.zeros_like(data.train.y), data.train.y)
    y[3] = label
    bad = Dataset(
        data.name,
        Split(data.train.x, y),
        data.validation,
        Split(data.test.x, torch.clamp(data.test.y, max=4)),
        declared,
    )
    config = TrainConfig.for_method(
        "dp-sgd", epochs=1, batch_size=40, hidden=(16,), noise_multiplier=2.0, alignment=False
    )
    with pytest.raises(DatasetError, match=r"dataset .clusters.: train labels must be integers in \[0, 4\]"):
        Trainer(config, data=bad, progress=False, log=lambda m: pytest.fail(f"no line before the refusal: {m}"))


def test_n_classes_out_of_range_names_the_option():
    with pytest.raises(TrainingConfigError, match=r"--n-classes must be an integer in \[2, "):
        TrainConfig.for_method("dp-sgd", n_classes=1)
