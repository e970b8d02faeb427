"""make_private with a user's DataLoader (workers, collate) and the OPU named by opu= (trainers.api)."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

from trainers.api import PrivacyEngine, UnsupportedModelError
from trainers.core.errors import TrainingConfigError


class Indexed(Dataset):
    """Item ``i`` is a dict holding ``i`` itself, so a batch shows which examples it drew."""

    def __init__(self, n: int = 256) -> None:
        g = torch.Generator().manual_seed(0)
        self.x, self.y = torch.randn(n, 8, generator=g), torch.randint(0, 3, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict:
        return {"x": self.x[i], "y": self.y[i], "index": i}


def collate_marked(items: list[dict]) -> dict:
    """A user's collate: stacks, and marks the batch as its own."""
    return {**{k: torch.stack([torch.as_tensor(item[k]) for item in items]) for k in items[0]}, "by": "user"}


def _wrap(loader, method="dp-dfa", **kw):
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
    engine = PrivacyEngine()
    wrapped = engine.make_private(
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        data_loader=loader,
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        method=method,
        **kw,
    )
    return engine, *wrapped


@pytest.mark.parametrize("method", ["dp-dfa", "dp-sgd"])
def test_a_dataloader_keeps_its_workers_and_collate_and_draws_the_secret_samplers_batches(method):
    loader = DataLoader(Indexed(), batch_size=32, num_workers=2, collate_fn=collate_marked, shuffle=True)
    engine, model, optimizer, private = _wrap(loader, method)
    assert private.options["num_workers"] == 2
    expected = [indices.tolist() for _, indices in private.sampler.epoch(0)]  # the secret key's epoch 0
    drawn = []
    for batch in private:
        assert batch["by"] == "user"
        drawn.append(sorted(batch["index"].tolist()))
        optimizer.zero_grad()
        F.cross_entropy(model(batch["x"]), batch["y"]).backward()
        optimizer.step()
    assert drawn == [sorted(e) for e in expected] and engine.steps == len(private)
    if method == "dp-dfa":
        assert {len(d) for d in drawn} == {32}  # fixed-size batches (Algorithm 1, line 5)


def test_a_dataloader_without_a_batch_size_works_when_make_private_is_given_one_and_says_so_when_not():
    loader = DataLoader(Indexed(), batch_size=None)
    with pytest.raises(
        TrainingConfigError, match=r"DataLoader\(batch_size=None\): pass make_private\(\.\.\., batch_size=N\)"
    ):
        _wrap(loader)
    _, _, _, private = _wrap(loader, batch_size=16)
    batch = next(iter(private))
    assert batch["x"].shape == (16, 8)  # collated as a batch, not one example converted


def test_device_keyword_still_names_the_opu_with_a_deprecation_warning():
    x, y = torch.randn(64, 8), torch.randint(0, 3, (64,))
    with pytest.warns(DeprecationWarning, match="opu="):
        _wrap((x, y), batch_size=16, noise_source="device", device="opu-sim-dp", lattice_resolution=20)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        _, _, optimizer, _ = _wrap((x, y), batch_size=16, noise_source="device", opu="opu-sim-dp")
    assert optimizer.mechanism.device.profile.label == "opu-sim-dp"


@pytest.mark.parametrize("keyword", ["device", "opu"])
def test_a_torch_device_given_as_the_opu_is_refused_with_the_fix(keyword):
    x, y = torch.randn(64, 8), torch.randint(0, 3, (64,))
    with pytest.raises(UnsupportedModelError, match="torch device"):
        _wrap((x, y), batch_size=16, **{keyword: "cuda"})
