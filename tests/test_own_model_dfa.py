"""DFA attached to a user's own nn.Sequential (trainers.api.dfa)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.training_helpers import clusters, simulated_device, torch_device
from trainers.api import UnsupportedModelError, attach_dfa, dfa_alignment
from trainers.core.model import MLP
from trainers.methods import DFA, PhotonicDFA, TernarizedDFA
from trainers.methods.base import MethodContext
from trainers.run.config import TrainConfig


def _pair(activation: str = "tanh"):
    """A built-in MLP and a user's nn.Sequential holding the same weights."""
    mlp = MLP([20, 32, 16, 10], activation=activation, seed=3)
    act = {"tanh": nn.Tanh, "relu": nn.ReLU, "sigmoid": nn.Sigmoid}[activation]
    user = nn.Sequential(nn.Linear(20, 32), act(), nn.Sequential(nn.Linear(32, 16), act()), nn.Linear(16, 10))
    user[0].load_state_dict(mlp.layers[0].state_dict())
    user[2][0].load_state_dict(mlp.layers[1].state_dict())
    user[3].load_state_dict(mlp.layers[2].state_dict())
    return mlp, user, [user[0], user[2][0], user[3]]


@pytest.mark.parametrize(
    "method,cls,make_device,activation",
    [
        ("dfa", DFA, torch_device, "tanh"),
        ("tdfa", TernarizedDFA, torch_device, "relu"),
        ("pdfa", PhotonicDFA, simulated_device, "sigmoid"),
    ],
)
def test_hook_updates_equal_the_builtin_method_on_the_same_model_and_feedback(method, cls, make_device, activation):
    data = clusters(n_train=64, n_test=2)
    x, y = data.train.x, data.train.y
    mlp, user, linears = _pair(activation)
    device = make_device(out_features=48)
    context = MethodContext(TrainConfig(method=method), device, 20, 10, len(x))
    cls(mlp, context).compute_gradients(x, y)
    attach_dfa(user, method, make_device(out_features=48))
    F.cross_entropy(user(x), y).backward()
    for ours, theirs in zip(linears, mlp.layers):
        assert torch.allclose(ours.weight.grad, theirs.weight.grad, atol=1e-6)
        assert torch.allclose(ours.bias.grad, theirs.bias.grad, atol=1e-6)
    bp_user = _pair(activation)[1]  # the hidden layer's DFA update is not backprop's gradient
    F.cross_entropy(bp_user(x), y).backward()
    assert not torch.allclose(linears[0].weight.grad, bp_user[0].weight.grad, atol=1e-4)


class Residual(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.inner = nn.Linear(width, width)

    def forward(self, x):
        return x + torch.tanh(self.inner(x))


@pytest.mark.parametrize(
    "model,named",
    [
        (nn.Sequential(nn.Linear(4, 8), nn.Tanh(), Residual(8), nn.Linear(8, 3)), "'2' (Residual)"),
        (nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Linear(8, 3)), "'1' (LayerNorm)"),
        (nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3), nn.Tanh()), "ends with an activation"),
    ],
)
def test_a_model_dfa_cannot_train_is_refused_naming_the_layer(model, named):
    with pytest.raises(UnsupportedModelError, match=named.replace("(", r"\(").replace(")", r"\)")):
        attach_dfa(model, "dfa", torch_device(out_features=48))


def test_pdfa_refuses_a_real_input_device():
    with pytest.raises(Exception, match="binary-input"):
        attach_dfa(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)), "pdfa", torch_device(out_features=48))


def test_alignment_is_one_at_the_output_and_positive_after_training_in_a_user_loop():
    data = clusters(n_train=512, n_test=2)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 32), nn.Tanh(), nn.Linear(32, 10))
    handle = attach_dfa(model, "dfa", torch_device(out_features=48))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = data.train.x, data.train.y
    for start in range(0, 512 * 6, 64):
        idx = torch.arange(start, start + 64) % 512
        optimizer.zero_grad()
        F.cross_entropy(model(x[idx]), y[idx]).backward()
        optimizer.step()
    with torch.no_grad():
        accuracy = float((model(x).argmax(1) == y).float().mean())
    cosines = dfa_alignment(handle, x[:128], y[:128])
    assert cosines["2"] == pytest.approx(1.0, abs=1e-5)
    assert cosines["0"] > 0.1
    assert accuracy > 0.8
    handle.detach()  # backprop again: the hidden gradient is the true one
    model.zero_grad()
    F.cross_entropy(model(x[:8]), y[:8]).backward()
    assert model[0].weight.grad is not None


def _hybrid(hidden: bool) -> nn.Sequential:
    """Paper 002's hybrid network on 1x4x5 images: conv prefix, then a Linear head."""
    torch.manual_seed(1)
    head = [nn.Linear(24, 32), nn.Tanh(), nn.Linear(32, 10)] if hidden else [nn.Linear(24, 10)]
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.Tanh(), nn.MaxPool2d(2, ceil_mode=True), nn.Flatten(), *head)


def _images(n: int):
    data = clusters(n_train=n, n_test=2)
    return data.train.x.view(n, 1, 4, 5), data.train.y


def test_a_conv_prefix_without_hidden_linear_gets_exactly_backprops_gradient():
    x, y = _images(32)
    model, reference = _hybrid(False), _hybrid(False)
    attach_dfa(model, "dfa", torch_device(out_features=48))
    F.cross_entropy(model(x), y).backward()
    F.cross_entropy(reference(x), y).backward()
    for ours, theirs in zip(model.parameters(), reference.parameters()):
        assert torch.allclose(ours.grad, theirs.grad, atol=1e-6)


def test_conv_layers_get_the_backprop_of_the_first_linears_dfa_signal():
    x, y = _images(32)
    model = _hybrid(True)
    handle = attach_dfa(model, "dfa", torch_device(out_features=48))
    seen = []
    project = handle.feedback.project
    handle.feedback.project = lambda e: seen.append(project(e)) or seen[-1]
    F.cross_entropy(model(x), y).backward()
    conv = model[0]
    z1 = model[:5](x)  # the first Linear's pre-activation, with the conv's graph
    delta1 = seen[0].slices[0] * (1 - torch.tanh(z1.detach()) ** 2) / len(x)  # (B^1 e) * phi'(z^1), mean loss
    expected = torch.autograd.grad((z1 * delta1).sum(), [conv.weight, conv.bias])
    assert torch.allclose(conv.weight.grad, expected[0], atol=1e-6)
    assert torch.allclose(conv.bias.grad, expected[1], atol=1e-6)
    backprop = torch.autograd.grad(
        F.cross_entropy(model[:5](x).tanh() @ model[6].weight.T + model[6].bias, y), conv.weight
    )[0]
    assert not torch.allclose(conv.weight.grad, backprop, atol=1e-4)  # DFA's signal, not backprop's


def test_the_hybrid_network_trains_by_dfa_in_a_user_loop_and_its_convs_align():
    x, y = _images(512)
    model = _hybrid(True)
    handle = attach_dfa(model, "dfa", torch_device(out_features=48))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    start = model[0].weight.detach().clone()
    for step in range(48):
        idx = torch.arange(step * 64, step * 64 + 64) % 512
        optimizer.zero_grad()
        F.cross_entropy(model(x[idx]), y[idx]).backward()
        optimizer.step()
    with torch.no_grad():
        accuracy = float((model(x).argmax(1) == y).float().mean())
    assert accuracy > 0.8 and not torch.equal(start, model[0].weight)
    cosines = dfa_alignment(handle, x[:128], y[:128])
    assert set(cosines) == {"0", "4", "6"} and cosines["6"] == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize(
    "model,named",
    [
        (nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(8, 3)), "'1' (BatchNorm2d)"),
        (nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Conv1d(1, 1, 3)), "'2' (Conv1d)"),
    ],
)
def test_an_unknown_layer_of_a_conv_prefix_or_a_conv_after_the_first_linear_is_refused_by_name(model, named):
    with pytest.raises(UnsupportedModelError, match=named.replace("(", r"\(").replace(")", r"\)")):
        attach_dfa(model, "dfa", torch_device(out_features=48))
