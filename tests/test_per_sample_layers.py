"""dp-sgd's per-example gradients of each supported layer (trainers.api.per_sample) against a
brute-force loop of single-example backward passes, and the clipped sum against the same loop."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from trainers.api.per_sample import trainable_params
from trainers.api.per_sample.linear import formed_squared_norms, ghost_squared_norms
from trainers.api.updates import PerExampleClipping
from trainers.core import formed
from trainers.core.conv_per_example import conv_formed_norms, conv_ghost_norms, grouped_output, patches


class Tokens(nn.Module):
    """Embedding -> mean over positions -> Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(7, 5, padding_idx=0)
        self.head = nn.Linear(5, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(x).mean(1))


def _image(c: int, h: int, w: int):
    return lambda n: torch.randn(n, c, h, w, dtype=torch.float64)


CASES = {
    "linear-sequence": (
        lambda: nn.Sequential(
            nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 16), nn.Linear(16, 16), nn.Flatten(), nn.Linear(64, 3)
        ),
        lambda n: torch.randn(n, 4, 6, dtype=torch.float64),
    ),
    "conv2d-padded": (
        lambda: nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 36, 3)),
        _image(3, 6, 6),
    ),
    "conv2d-strided-grouped-dilated": (
        lambda: nn.Sequential(
            nn.Conv2d(4, 16, (3, 2), stride=2, dilation=(1, 2), groups=2, bias=False),
            nn.Tanh(),
            nn.Conv2d(16, 16, 3, stride=2),
            nn.Flatten(),
            nn.Linear(64, 3),
        ),
        _image(4, 11, 13),
    ),
    "conv1d-same-reflect": (
        lambda: nn.Sequential(
            nn.Conv1d(2, 4, 4, padding="same", dilation=2),
            nn.Conv1d(4, 3, 3, padding=1, padding_mode="reflect"),
            nn.Flatten(),
            nn.Linear(27, 3),
        ),
        lambda n: torch.randn(n, 2, 9, dtype=torch.float64),
    ),
    "groupnorm": (
        lambda: nn.Sequential(nn.Conv2d(2, 6, 3), nn.GroupNorm(3, 6), nn.Flatten(), nn.Linear(6 * 16, 3)),
        _image(2, 6, 6),
    ),
    "layernorm": (
        lambda: nn.Sequential(nn.Linear(6, 5), nn.LayerNorm((4, 5)), nn.Flatten(), nn.Linear(20, 3)),
        lambda n: torch.randn(n, 4, 6, dtype=torch.float64),
    ),
    "instancenorm1d": (
        lambda: nn.Sequential(nn.Conv1d(2, 4, 3), nn.InstanceNorm1d(4, affine=True), nn.Flatten(), nn.Linear(28, 3)),
        lambda n: torch.randn(n, 2, 9, dtype=torch.float64),
    ),
    "instancenorm2d": (
        lambda: nn.Sequential(nn.Conv2d(2, 4, 3), nn.InstanceNorm2d(4, affine=True), nn.Flatten(), nn.Linear(64, 3)),
        _image(2, 6, 6),
    ),
    "embedding": (Tokens, lambda n: torch.randint(0, 7, (n, 9))),  # repeated indices and padding
}


def _setup(case: str, n: int = 6):
    torch.manual_seed(0)
    make_model, make_x = CASES[case]
    model = make_model().double()
    x, y = make_x(n), torch.randint(0, 3, (n,))
    return model, x, y


def _brute_force(model: nn.Module, params: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Row i: the flat gradient of example i's loss alone (its own backward pass)."""
    rows = []
    for i in range(x.shape[0]):
        model.zero_grad()
        F.cross_entropy(model(x[i : i + 1]), y[i : i + 1], reduction="sum").backward()
        rows.append(torch.cat([p.grad.flatten() for p in params]))
    return torch.stack(rows)


def _clipping(model: nn.Module, x: torch.Tensor, y: torch.Tensor, clip: float = 1.0) -> PerExampleClipping:
    update = PerExampleClipping(model, clip, "mean", expected_batch=x.shape[0], dataset_size=100)
    model.zero_grad()
    F.cross_entropy(model(x), y).backward()
    return update


@pytest.mark.parametrize("case", list(CASES))
def test_each_layers_per_example_gradients_and_norms_equal_single_example_backward_passes(case):
    model, x, y = _setup(case)
    update = _clipping(model, x, y)
    brute = _brute_force(model, update.params, x, y)
    update = _clipping(model, x, y)
    start = 0
    for layer, rule, state in update.prepared():
        norms = rule.squared_norms(layer, state)
        # example i's own gradient: the clipped sum with weight 1 on example i and 0 elsewhere
        alone = [rule.clipped_sums(layer, state, torch.eye(x.shape[0], dtype=torch.float64)[i]) for i in range(len(x))]
        for name, p in trainable_params(layer).items():
            expected = brute[:, start : start + p.numel()]
            torch.testing.assert_close(torch.stack([g[name].flatten() for g in alone]), expected, rtol=1e-9, atol=1e-12)
            torch.testing.assert_close(norms[name], expected.pow(2).sum(1), rtol=1e-9, atol=1e-12)
            start += p.numel()
    assert start == brute.shape[1] == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("case", list(CASES))
def test_clipped_sum_equals_the_sum_of_single_example_gradients_each_clipped(case):
    model, x, y = _setup(case)
    update = _clipping(model, x, y)
    brute = _brute_force(model, update.params, x, y)
    norms = brute.norm(dim=1)
    clip = float(norms.median())  # about half the examples are clipped
    update = _clipping(model, x, y, clip)
    expected = (brute * torch.clamp(clip / norms, max=1.0)[:, None]).sum(0)
    assert (norms > clip).any() and (norms <= clip).any()
    torch.testing.assert_close(update.squared_norms(), norms.pow(2), rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(update.clipped(), expected, rtol=1e-9, atol=1e-12)


def test_linear_ghost_and_formed_norms_agree_on_sequences():
    torch.manual_seed(0)
    a, g = torch.randn(5, 21, 8, dtype=torch.float64), torch.randn(5, 21, 4, dtype=torch.float64)
    torch.testing.assert_close(ghost_squared_norms(g, a), formed_squared_norms(g, a))


def test_conv_ghost_and_formed_norms_agree_with_groups():
    torch.manual_seed(0)
    conv = nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2).double()
    x = torch.randn(5, 4, 7, 7, dtype=torch.float64)
    u, g = patches(conv, x), grouped_output(conv, torch.randn(5, 6, 4, 4, dtype=torch.float64))
    torch.testing.assert_close(conv_ghost_norms(g, u), conv_formed_norms(g, u))


def test_layers_too_large_to_form_take_ghost_or_chunked_norms_and_the_same_clipped_sum(monkeypatch):
    monkeypatch.setattr(formed, "FORMED_BYTES", 0)  # nothing is formed and kept
    for case in ("linear-sequence", "conv2d-strided-grouped-dilated", "conv2d-padded"):
        model, x, y = _setup(case)
        update = _clipping(model, x, y)
        brute = _brute_force(model, update.params, x, y)
        update = _clipping(model, x, y, clip=0.5)
        assert all(getattr(state, "formed", None) is None for _, _, state in update.prepared())
        norms = brute.norm(dim=1)
        torch.testing.assert_close(update.squared_norms(), norms.pow(2), rtol=1e-9, atol=1e-12)
        expected = (brute * torch.clamp(0.5 / norms, max=1.0)[:, None]).sum(0)
        torch.testing.assert_close(update.clipped(), expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("case", ["linear-sequence", "conv2d-strided-grouped-dilated", "groupnorm", "embedding"])
def test_an_empty_poisson_batch_releases_a_zero_clipped_sum(case):
    model, x, y = _setup(case, n=0)
    update = _clipping(model, x, y)
    assert torch.equal(update.clipped(), torch.zeros(sum(p.numel() for p in model.parameters()), dtype=torch.float64))


def test_frozen_parameters_are_neither_clipped_nor_released():
    model, x, y = _setup("groupnorm")
    model[0].bias.requires_grad_(False)
    model[1].weight.requires_grad_(False)
    update = _clipping(model, x, y)
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert [id(p) for p in update.params] == [id(p) for p in trainable]
    brute = _brute_force(model, trainable, x, y)
    update = _clipping(model, x, y, clip=1e6)  # nothing clipped: the sum of the per-example gradients
    torch.testing.assert_close(update.clipped(), brute.sum(0), rtol=1e-9, atol=1e-12)
