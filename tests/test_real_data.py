"""Smoke tests on the real FashionMNIST files (Debian package ``dataset-fashion-mnist``).

Skipped when the files are absent, unless ``OPU_HAL_REQUIRE_DATA=1`` (CI sets it), where a
missing dataset is a failure rather than a silent skip.
"""

from __future__ import annotations

import os

import pytest

from trainers.core.data import DatasetError, load_dataset
from trainers.run.config import TrainConfig
from trainers.run.loop import train


@pytest.fixture(scope="module")
def fashion():
    try:
        return load_dataset("fashion-mnist")
    except DatasetError as exc:
        if os.environ.get("OPU_HAL_REQUIRE_DATA") == "1":
            pytest.fail(f"FashionMNIST is required here: {exc}")
        pytest.skip(f"FashionMNIST not installed: {exc}")


def test_fashion_mnist_has_the_paper_split(fashion):
    assert (len(fashion.train), len(fashion.validation), len(fashion.test)) == (54000, 6000, 10000)


def test_pdfa_on_the_simulated_opu_learns_fashion_mnist(fashion):
    config = TrainConfig.for_method("pdfa", epochs=1, train_limit=4096, alignment=False)
    record = train(config, data=fashion, progress=False, log=lambda message: None)
    assert record["profile"]["name"] == "opu-sim"
    assert record["final"]["test_accuracy"] > 0.4  # 16 steps; chance is 0.1


def test_dp_dfa_with_device_noise_runs_on_fashion_mnist_within_budget(fashion):
    config = TrainConfig.for_method(
        "dp-dfa", epochs=1, train_limit=2560, noise_source="device", target_epsilon=8.0, alignment=False
    )
    record = train(config, data=fashion, progress=False, log=lambda message: None)
    assert record["final"]["epsilon"] <= 8.0 and record["final"]["delta"] == 1e-5
    privacy = record["privacy"]
    assert privacy["noise_source"] == "device" and privacy["mechanism"] == "skellam"
    assert record["profile"]["name"] == "opu-sim-dp"
    assert privacy["device_noise"]["poisson_mean_lower"] >= privacy["lattice"]["poisson_mean_accounted"]


@pytest.fixture(scope="module")
def mnist():
    try:
        return load_dataset("mnist")
    except DatasetError as exc:
        if os.environ.get("OPU_HAL_REQUIRE_DATA") == "1":
            pytest.fail(f"MNIST is required here (scripts/setup.sh installs it): {exc}")
        pytest.skip(f"MNIST not installed: {exc}")


def test_mnist_loads_from_the_setup_folder_with_its_declared_classes(mnist):
    assert (len(mnist.train), len(mnist.validation), len(mnist.test)) == (54000, 6000, 10000)
    assert mnist.classes == 10 and mnist.train.x.shape[1] == 784
    # the original MNIST test split: 980 zeros and 1135 ones (LeCun et al.'s published counts)
    counts = mnist.test.y.bincount(minlength=10)
    assert counts[0] == 980 and counts[1] == 1135
