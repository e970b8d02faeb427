"""``--compute``: the trainers on CUDA give the CPU's results (skips cleanly without CUDA)."""

from __future__ import annotations

import pytest
import torch

from tests.training_helpers import clusters
from trainers.core.errors import TrainingConfigError
from trainers.run.config import TrainConfig
from trainers.run.loop import train

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: torch sees no GPU on this machine")


def _run(method: str, compute: str, **kw):
    config = TrainConfig.for_method(
        method, features="pixels", epochs=2, batch_size=50, hidden=(32, 32), compute=compute, alignment=False, **kw
    )
    return train(config, data=clusters(), progress=False, log=lambda m: None)


def test_cpu_compute_is_recorded():
    record = _run("bp", "cpu")
    assert record["torch"]["compute"] == "cpu"


def test_cuda_compute_without_cuda_is_refused_by_name():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(TrainingConfigError, match="--compute cuda"):
        _run("bp", "cuda")


def test_cpu_only_methods_refuse_cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA to reach the method check")
    with pytest.raises(TrainingConfigError, match="CPU only"):
        _run("dp-mac", "cuda", noise_multiplier=1.0)


@CUDA
@pytest.mark.parametrize("method, extra", [("bp", {}), ("dfa", {"profile": "torch-cpu"})])
def test_cuda_training_matches_the_cpu_within_float_tolerance(method, extra):
    cpu, cuda = _run(method, "cpu", **extra), _run(method, "cuda", **extra)
    assert cuda["torch"]["compute"].startswith("cuda")
    for a, b in zip(cpu["epochs"], cuda["epochs"]):
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-3)
        assert b["test_accuracy"] == pytest.approx(a["test_accuracy"], abs=0.02)


@CUDA
@pytest.mark.parametrize("method, extra", [("dp-sgd", {}), ("dp-dfa", {}), ("dp-dfa", {"noise_source": "device"})])
def test_private_methods_train_on_cuda(method, extra):
    record = _run(method, "cuda", noise_multiplier=1.0, **extra)
    assert record["torch"]["compute"].startswith("cuda") and record["final"]["epsilon"] > 0
