"""DFA and DP-DFA on models written as classes, feedback at named layers (trainers.api.cut_tap)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.training_helpers import clusters, torch_device
from trainers.api import PrivacyEngine, UnsupportedModelError, attach_dfa


class ClassMLP(nn.Module):
    """20-32-16-10 with functional activations: nothing in it says where the activations are."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.out = nn.Linear(20, 32), nn.Linear(32, 16), nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.fc2(F.relu(self.fc1(x)))))


def _twins() -> tuple[ClassMLP, nn.Sequential]:
    """A class-defined MLP and the nn.Sequential with the same layers and weights."""
    torch.manual_seed(0)
    model = ClassMLP()
    twin = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 16), nn.Tanh(), nn.Linear(16, 10))
    twin.load_state_dict(dict(zip(twin.state_dict(), model.state_dict().values())))
    return model, twin


def _data(n: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    data = clusters(n_train=n, n_test=2)
    return data.train.x, data.train.y


def test_a_class_model_gets_the_same_dfa_updates_as_its_sequential_twin():
    (x, y), (model, twin) = _data(), _twins()
    attach_dfa(model, opu=torch_device(out_features=48))
    attach_dfa(twin, opu=torch_device(out_features=48))
    F.cross_entropy(model(x), y).backward()
    F.cross_entropy(twin(x), y).backward()
    for ours, theirs in zip(model.parameters(), twin.parameters()):
        assert torch.allclose(ours.grad, theirs.grad, atol=1e-6)


class ConvNet(nn.Module):
    """A conv block with a skip inside it, then a Linear head: paper 002's hybrid, written as a class."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.features = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.Tanh())
        self.fc, self.out = nn.Linear(80, 16), nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.features(x)
        h = (h + torch.relu(h)).flatten(1)  # the skip stays inside the named block's output
        return self.out(torch.tanh(self.fc(h)))


def test_a_named_conv_block_gets_backprop_of_its_own_feedback_signal():
    x, y = _data()
    x = x.view(-1, 1, 4, 5)
    model = ConvNet()
    handle = attach_dfa(model, opu=torch_device(out_features=96), layers=["features", "fc", "out"])
    seen = []
    project = handle._signals
    handle.tap.signals = lambda g, r: seen.append(project(g, r)) or seen[-1]
    F.cross_entropy(model(x), y).backward()
    conv = model.features[0]
    h = model.features(x)
    expected = torch.autograd.grad(((h + torch.relu(h)).flatten(1) * seen[0][0]).sum(), conv.weight)[0]
    assert torch.allclose(conv.weight.grad, expected, atol=1e-6)
    reference = ConvNet()  # the same weights, trained by backprop
    backprop = torch.autograd.grad(F.cross_entropy(reference(x), y), reference.features[0].weight)[0]
    assert not torch.allclose(conv.weight.grad, backprop, atol=1e-4)  # DFA's signal, not backprop's


class SkipAcross(ClassMLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.fc1(x))
        return self.out(torch.tanh(self.fc2(h)) + h[:, :16])  # fc1 reaches out's input around fc2


class SkipToOutput(ClassMLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.fc1(x))
        return self.out(torch.tanh(self.fc2(h))) + h[:, :10]


@pytest.mark.parametrize("cls,where", [(SkipAcross, "the input of 'out'"), (SkipToOutput, "the model's output")])
def test_a_residual_path_across_a_named_layer_is_refused_naming_it(cls, where):
    model = cls()
    attach_dfa(model, opu=torch_device(out_features=48))
    with pytest.raises(UnsupportedModelError, match=f"{where} depends on layer\\(s\\) 'fc1'"):
        model(_data()[0])


def test_named_layers_out_of_call_order_or_unknown_are_refused():
    model = ClassMLP()
    attach_dfa(model, opu=torch_device(out_features=48), layers=["fc2", "fc1", "out"])
    with pytest.raises(UnsupportedModelError, match="pass layers= in the order forward"):
        model(_data()[0])
    with pytest.raises(UnsupportedModelError, match="no submodule 'fc3'.*fc1, fc2, out"):
        attach_dfa(ClassMLP(), opu=torch_device(out_features=48), layers=["fc1", "fc3"])


def _private(model: nn.Module, **kw):
    x, y = _data(256)
    return PrivacyEngine().make_private(
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        data_loader=(x, y),
        batch_size=32,
        noise_multiplier=1.0,
        max_grad_norm=0.1,
        method="dp-dfa",
        **kw,
    )


def test_dp_dfa_on_a_class_model_clips_the_same_update_as_on_its_sequential_twin():
    (x, y), (model, twin) = _data(), _twins()
    _, ours, _ = _private(model)
    _, theirs, _ = _private(twin)
    F.cross_entropy(model(x), y).backward()
    F.cross_entropy(twin(x), y).backward()
    assert ours.update.sensitivity == pytest.approx(theirs.update.sensitivity, rel=1e-12)
    assert torch.allclose(ours.update.clipped(), theirs.update.clipped(), atol=1e-7)


class SteepBetween(ClassMLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.fc2(50.0 * self.fc1(x))))  # derivative 50 between fc1 and fc2


def test_dp_dfa_clips_each_examples_signal_whatever_forward_applies_between_layers():
    x, y = _data()
    model = SteepBetween()
    _, optimizer, _ = _private(model)
    F.cross_entropy(model(x), y).backward()
    update = optimizer.update
    released = update.clipped()
    signal = update.signals[0]
    assert signal.norm(dim=1).max() > 5 * update.signal_clip  # the raw signal exceeds gamma beta tau_e
    clipped = signal * (update.signal_clip / signal.norm(dim=1, keepdim=True)).clamp(max=1)
    h = x * (update.tau_h / x.norm(dim=1, keepdim=True)).clamp(max=1)
    assert torch.allclose(released[: 32 * 20], (clipped.T @ h / update.batch_size).flatten(), atol=1e-7)


class Normed(ClassMLP):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.fc2(self.norm(self.fc1(x)))))


class LogSoftmax(ClassMLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(super().forward(x), dim=1)


def test_dp_dfa_refuses_batchnorm_and_an_output_that_is_not_the_last_layers():
    with pytest.raises(UnsupportedModelError, match="'norm' \\(BatchNorm1d\\) mixes the examples"):
        _private(Normed())
    model = LogSoftmax()
    _private(model)
    with pytest.raises(UnsupportedModelError, match="other than the output of 'out'"):
        model(_data()[0])
