"""dp-dfa on a CNN written as a class: paper 002's hybrid BP/DFA (trainers.api.class_hybrid)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from trainers.api import PrivacyEngine, UnsupportedModelError
from trainers.methods.dfa_sensitivity import DFASensitivity


class SmallCNN(nn.Module):
    """conv + GroupNorm block, a Linear hidden layer (the first tap) and the output."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.norm = nn.Conv2d(1, 4, 3, padding=1), nn.GroupNorm(2, 4)
        self.fc1, self.out = nn.Linear(4 * 4 * 4, 16), nn.Linear(16, 10)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return F.avg_pool2d(torch.relu(self.norm(self.conv(x))), 2).flatten(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.fc1(self.features(x))))


def _data(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, 1, 8, 8, generator=g), torch.randint(0, 10, (n,), generator=g)


def _private(model: nn.Module, n: int = 64, **kw):
    x, y = _data(n)
    return PrivacyEngine().make_private(
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        data_loader=(x, y),
        batch_size=16,
        noise_multiplier=1.0,
        max_grad_norm=0.1,
        method="dp-dfa",
        **kw,
    )


def _reference_conv_updates(model: SmallCNN, update, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Per example, by its own backward pass: the gradient of ``<z^1, delta^1>`` (paper 002's hybrid)
    for the conv and the norm, each layer clipped to tau_c, summed and divided by the batch size;
    and how many (example, layer) gradients the clipping shortened."""
    b = update.feedback[0]
    total = [torch.zeros(p.numel(), dtype=torch.float64) for p in update.hybrid.params]
    tau_c, shortened = update.beta * update.tau_e * math.sqrt(1 + update.tau_h**2), 0
    for i in range(len(y)):
        with torch.no_grad():
            logits = model(x[i : i + 1]).double()
            error = torch.softmax(logits, 1) - F.one_hot(y[i : i + 1], 10).double()
            e = error * (update.tau_e / error.norm()).clamp(max=1)
        z1 = model.fc1(model.features(x[i : i + 1]))
        delta = ((e @ b.T.double()) * (1 - torch.tanh(z1.detach().double()) ** 2)).to(z1.dtype)
        grads = torch.autograd.grad((z1 * delta).sum(), update.hybrid.params)
        for layer in ([0, 1], [2, 3]):  # conv weight and bias, norm weight and bias
            flat = torch.cat([grads[j].double().flatten() for j in layer])
            shortened += int(flat.norm() > tau_c)
            flat = flat * (tau_c / flat.norm()).clamp(max=1)
            for j, part in zip(layer, flat.split([grads[j].numel() for j in layer])):
                total[j] += part
    return torch.cat(total) / update.batch_size, shortened


def test_a_class_cnns_conv_and_norm_get_the_clipped_hybrid_bp_dfa_update():
    torch.manual_seed(0)
    model = SmallCNN()
    with torch.no_grad():
        model.fc1.weight.mul_(4.0)  # larger conv gradients: some exceed tau_c
    _, optimizer, _ = _private(model)
    x, y = _data(16)
    F.cross_entropy(model(x), y).backward()
    update = optimizer.update
    conv_part = update.clipped()[-sum(p.numel() for p in update.hybrid.params) :]
    update.tap.enabled = False  # the reference's own passes are plain autograd
    reference, shortened = _reference_conv_updates(model, update, x, y)
    assert torch.allclose(conv_part.double(), reference, rtol=1e-4, atol=1e-8)
    assert 0 < shortened < 2 * len(y)


def test_each_backprop_trained_layer_adds_one_conv_term_to_the_sensitivity():
    _, optimizer, _ = _private(SmallCNN())
    update = optimizer.update
    expected = DFASensitivity(1.0, update.beta, 0.1, update.tau_h, 16, hidden=1, convs=2).total
    assert update.sensitivity == pytest.approx(expected, rel=1e-12)
    assert sum(p.numel() for p in optimizer.update.params) == sum(p.numel() for p in SmallCNN().parameters())


class Scaled(SmallCNN):
    def __init__(self) -> None:
        super().__init__()
        self.gain = nn.PReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.fc1(self.gain(self.features(x)))))


def test_a_trainable_layer_without_a_per_example_rule_is_refused_by_name():
    with pytest.raises(UnsupportedModelError, match="'gain' \\(PReLU\\) has trainable parameters outside.*Conv2d"):
        _private(Scaled())


def test_a_sequential_cnn_trains_its_convs_by_the_hybrid_rule_when_its_linears_are_named():
    model = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.Tanh(), nn.Flatten(), nn.Linear(128, 10))
    with pytest.raises(UnsupportedModelError, match="pass layers="):
        _private(model)
    _, optimizer, _ = _private(model, layers=["3"])
    x, y = _data(16)
    F.cross_entropy(model(x), y).backward()
    assert len(optimizer.update.clipped()) == sum(p.numel() for p in model.parameters())


class RunningStats(SmallCNN):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.InstanceNorm2d(4, track_running_stats=True)  # no parameters, but learning buffers


def test_running_statistics_outside_the_named_layers_are_refused_by_name():
    with pytest.raises(UnsupportedModelError, match="'norm' \\(InstanceNorm2d\\): .*track_running_stats=True"):
        _private(RunningStats())
