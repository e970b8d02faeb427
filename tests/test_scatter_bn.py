"""The channel-norm probe's release (scripts.analysis.scatter_bn): clipping, exact standardisation
without privacy, and the event it charges."""

from __future__ import annotations

import math

import pytest
import torch

from scripts.analysis import scatter_bn
from trainers.core.data import Dataset, Split


def test_clipped_sum_moves_by_at_most_the_threshold_per_row():
    rows = torch.tensor([[3.0, 4.0], [0.3, 0.4]], dtype=torch.float64)
    assert torch.allclose(scatter_bn.clipped_sum(rows, 1.0), torch.tensor([0.9, 1.2], dtype=torch.float64))


def test_without_privacy_the_channel_norm_standardises_each_channel(monkeypatch):
    monkeypatch.setitem(scatter_bn._thresholds, "mean", 1.0)
    monkeypatch.setitem(scatter_bn._thresholds, "square", 1.0)
    torch.manual_seed(0)
    x = torch.rand(500, scatter_bn.CHANNELS * 4) * torch.linspace(1, 3, scatter_bn.CHANNELS).repeat_interleave(4)
    centering = scatter_bn.release_channel_norm(x, False, 8.0, len(x), "add_remove")
    split = Split(x, torch.zeros(len(x), dtype=torch.long))
    normed = scatter_bn.channel_normalized(Dataset("toy", split, split, split), centering.mean).train.x
    per_channel = normed.reshape(len(x), scatter_bn.CHANNELS, -1).double()
    assert per_channel.mean((0, 2)).abs().max() < 1e-4
    assert torch.allclose(
        per_channel.square().mean((0, 2)), torch.ones(scatter_bn.CHANNELS, dtype=torch.float64), atol=1e-3
    )
    assert centering.event is None


@pytest.mark.parametrize("neighboring, factor", [("add_remove", 1.0), ("replace_one", 2.0)])
def test_the_private_release_charges_two_gaussians_as_one_at_sigma_over_root_two(monkeypatch, neighboring, factor):
    monkeypatch.setitem(scatter_bn._thresholds, "mean", 0.5)
    monkeypatch.setitem(scatter_bn._thresholds, "square", 2.0)
    centering = scatter_bn.release_channel_norm(torch.rand(50, scatter_bn.CHANNELS * 4), True, 8.0, 50, neighboring)
    assert centering.event is not None and math.isclose(centering.event.noise_multiplier, 8.0 / math.sqrt(2))
    assert centering.mean.shape == (2, scatter_bn.CHANNELS * 4)
