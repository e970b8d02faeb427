"""DP-DFA's update on an MLP (paper 002, Algorithm 1, lines 15-16 before the noise), as written into
one flat tensor: ``delta^T clip(h, tau_h) / m`` per layer, ``delta = (B e) * phi'(z)`` with ``e``
clipped to ``tau_e``, and ``phi'`` taken from the layer's output where the activation allows."""

import pytest
import torch
import torch.nn.functional as F

from trainers.core.model import ACTIVATIONS, MLP
from trainers.methods.base import MethodContext
from trainers.methods.dp_dfa import DPDFA
from trainers.run.config import TrainConfig


@pytest.mark.parametrize("name", ["tanh", "sigmoid"])
def test_the_derivative_at_the_output_is_the_derivative_bit_for_bit(name):
    activation = ACTIVATIONS[name]
    z = 4 * torch.randn(5000)
    assert activation.derivative_at_output is not None
    assert torch.equal(activation.derivative_at_output(activation.fn(z)), activation.derivative(z))


def _method(activation: str, batch: int) -> tuple[MLP, DPDFA]:
    config = TrainConfig.for_method(
        "dp-dfa", hidden=(7, 5), activation=activation, tau_e=0.3, tau_h=2.0, batch_size=batch, noise_multiplier=1.0
    )
    model = MLP([20, 7, 5, 10], activation, seed=3)
    method = DPDFA(model, MethodContext(config, None, 20, 10, 1000))
    method.set_noise_multiplier(1e-30)  # the clipped update itself
    return model, method


@pytest.mark.parametrize("activation", ["tanh", "sigmoid", "relu", "gelu"])
def test_dp_dfa_mlp_update_is_the_clipped_average_of_algorithm_1(activation):
    batch = 12
    model, method = _method(activation, batch)
    x, y = 3 * torch.randn(batch, 20), torch.randint(0, 10, (batch,))
    method.compute_gradients(x, y)
    phi = ACTIVATIONS[activation]
    with torch.no_grad():
        trace = model.forward_trace(x)
        e = torch.softmax(trace.logits, 1) - F.one_hot(y, 10)
        e = e * torch.clamp(0.3 / e.norm(dim=1, keepdim=True), max=1.0)
        deltas = [(e @ b.T) * phi.derivative(z) for b, z in zip(method.feedback, trace.preacts)]
        deltas.append(method.output_scale * e)
        for layer, delta, h in zip(model.layers, deltas, trace.inputs):
            h = h * torch.clamp(2.0 / h.norm(dim=1, keepdim=True), max=1.0)
            torch.testing.assert_close(layer.weight.grad, delta.T @ h / batch, rtol=1e-5, atol=1e-7)
            torch.testing.assert_close(layer.bias.grad, delta.sum(0) / batch, rtol=1e-5, atol=1e-7)


def test_dp_dfa_releases_every_parameter_once_in_one_flat_update():
    model, method = _method("tanh", 4)
    seen = []
    method.intercept_release(lambda u: seen.append(u.clone()) or u)
    method.compute_gradients(torch.randn(4, 20), torch.randint(0, 10, (4,)))
    assert len(seen) == 1 and seen[0].numel() == sum(p.numel() for p in model.parameters())
    flat_grads = torch.cat([t.grad.flatten() for layer in model.layers for t in (layer.weight, layer.bias)])
    assert torch.equal(flat_grads, seen[0])
