"""A batch is charged as what it was: ``optimizer.step()`` releases only the update of the batch the
private loader drew (its size and its values), once; anything else is refused naming the cause,
with nothing released or charged. A NaN update is refused at the step, never released."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from opu_hal import OpuHalError
from trainers.api import PrivacyEngine

X, Y = torch.randn(200, 5, generator=torch.Generator().manual_seed(0)), torch.arange(200) % 3


def _private(method: str):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3))
    engine = PrivacyEngine()
    model, optimizer, loader = engine.make_private(
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        data_loader=(X, Y),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        batch_size=50,
        method=method,
    )
    return engine, model, optimizer, iter(loader)


def _backward(model, optimizer, x, y) -> None:
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()


@pytest.mark.parametrize("method", ["dp-sgd", "dp-dfa"])
def test_backward_on_the_whole_dataset_instead_of_the_batch_is_refused(method):
    engine, model, optimizer, batches = _private(method)
    next(batches)
    _backward(model, optimizer, X, Y)
    with pytest.raises(OpuHalError, match="the update holds 200 example"):
        optimizer.step()
    assert engine.steps == 0


@pytest.mark.parametrize("method", ["dp-sgd", "dp-dfa"])
def test_a_batch_of_the_same_size_that_the_loader_did_not_draw_is_refused(method):
    engine, model, optimizer, batches = _private(method)
    xb, yb = next(batches)
    _backward(model, optimizer, X[: len(xb)] + 1.0, yb)
    with pytest.raises(OpuHalError, match="not the batch of"):
        optimizer.step()
    assert engine.steps == 0


@pytest.mark.parametrize("method", ["dp-sgd", "dp-dfa"])
def test_a_second_step_on_one_drawn_batch_is_refused(method):
    engine, model, optimizer, batches = _private(method)
    xb, yb = next(batches)
    _backward(model, optimizer, xb, yb)
    optimizer.step()
    _backward(model, optimizer, xb, yb)
    with pytest.raises(OpuHalError, match="no batch was drawn"):
        optimizer.step()
    assert engine.steps == 1


@pytest.mark.parametrize("method", ["dp-sgd", "dp-dfa"])
def test_the_drawn_batch_moved_and_reshaped_is_accepted(method):
    engine, model, optimizer, batches = _private(method)
    for xb, yb in batches:
        _backward(model, optimizer, xb.float().reshape(len(xb), -1).contiguous(), yb)
        optimizer.step()
    assert engine.steps == 4


@pytest.mark.parametrize("method", ["dp-sgd", "dp-dfa"])
def test_a_nan_update_is_refused_at_the_step_and_nothing_is_charged(method):
    engine, model, optimizer, batches = _private(method)
    with torch.no_grad():
        model[0].weight[0, 0] = float("nan")
    xb, yb = next(batches)
    _backward(model, optimizer, xb, yb)
    with pytest.raises(OpuHalError, match="NaN or infinity"):
        optimizer.step()
    assert engine.steps == 0
