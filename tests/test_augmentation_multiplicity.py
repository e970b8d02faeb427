"""The augmentation-multiplicity probe's per-example norms and centring (scripts.analysis.augmentation_multiplicity)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from scripts.analysis.augmentation_multiplicity import ViewMean, centered_views, view_squared_norms
from trainers.core.data import Dataset, Split
from trainers.core.model import MLP


def per_example_squared_norms(model: MLP, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``||grad l_i||^2`` of each example's loss, the mean over its views, by autograd one example at a time."""
    norms = []
    for xi, yi in zip(x, y):
        loss = F.cross_entropy(model(xi), yi.repeat(len(xi)))  # the mean over the views
        grads = torch.autograd.grad(loss, list(model.parameters()))
        norms.append(sum(g.pow(2).sum() for g in grads))
    return torch.stack(norms)


def test_view_norms_are_the_norms_of_each_examples_mean_gradient_over_its_views():
    torch.manual_seed(0)
    model = MLP([6, 5, 3], "tanh")
    x, y = torch.randn(4, 2, 6), torch.tensor([0, 2, 1, 2])
    batch, views = x.shape[:2]
    trace = model.forward_trace(x.reshape(batch * views, 6))
    losses = F.cross_entropy(trace.logits, y.repeat_interleave(views), reduction="none").view(batch, views).mean(1)
    grads = torch.autograd.grad(losses.sum(), trace.preacts)
    ghost = sum(view_squared_norms(g, a.detach(), views) for g, a in zip(grads, trace.inputs))
    assert torch.allclose(ghost, per_example_squared_norms(model, x, y), rtol=1e-5)


def test_views_centre_on_their_own_half_and_single_view_splits_on_the_first():
    mean = torch.tensor([[1.0, 2.0], [3.0, 4.0]])  # (K, d)
    train = Split(torch.ones(3, 2, 2), torch.zeros(3, dtype=torch.long))
    single = Split(torch.ones(2, 2), torch.zeros(2, dtype=torch.long))
    data = centered_views(Dataset("toy", train, single, single), mean)
    assert torch.equal(data.train.x[0], 1 - mean)
    assert torch.equal(data.test.x[0], 1 - mean[0])


def test_view_mean_averages_the_logits_of_the_views_and_leaves_single_views_alone():
    torch.manual_seed(0)
    model = MLP([4, 3], "tanh")
    x = torch.randn(5, 2, 4)
    assert torch.allclose(ViewMean(model)(x), (model(x[:, 0]) + model(x[:, 1])) / 2)
    assert torch.equal(ViewMean(model)(x[:, 0]), model(x[:, 0]))
