"""make_private on a model on CUDA: batches, clipped updates, noise and feedback on the model's device.

Skipped without a GPU (CI has none); a few seconds on one. Random data: it checks placement and that
steps run and are charged, not learning.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from trainers.api import PrivacyEngine

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA GPU: make_private on a model moved to 'cuda' needs one"
)


class ClassMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.out = nn.Linear(20, 32), nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.fc1(x)))


@pytest.mark.parametrize(
    "method,noise_source,model",
    [
        ("dp-sgd", "software", "sequential"),
        ("dp-dfa", "software", "sequential"),
        ("dp-dfa", "software", "class"),
        ("dp-dfa", "device", "class"),
    ],
)
def test_make_private_steps_on_the_models_cuda_device(method, noise_source, model):
    torch.manual_seed(0)
    net = ClassMLP() if model == "class" else nn.Sequential(nn.Linear(20, 32), nn.Tanh(), nn.Linear(32, 10))
    net = net.to("cuda")
    before = [p.detach().clone() for p in net.parameters()]
    x, y = torch.randn(512, 20), torch.randint(0, 10, (512,))  # CPU tensors: the loader moves them
    engine = PrivacyEngine()
    options = {"opu": "opu-sim-dp", "lattice_resolution": 20} if noise_source == "device" else {}
    net, optimizer, loader = engine.make_private(
        module=net,
        optimizer=torch.optim.SGD(net.parameters(), lr=0.1),
        data_loader=(x, y),
        batch_size=64,
        noise_multiplier=1.0,
        max_grad_norm=0.1,
        method=method,
        noise_source=noise_source,
        **options,
    )
    for xb, yb in loader:
        assert xb.device.type == "cuda" and yb.device.type == "cuda"
        optimizer.zero_grad()
        F.cross_entropy(net(xb), yb).backward()
        optimizer.step()
    assert engine.steps == len(loader) > 0
    assert all(p.device.type == "cuda" and p.grad.device.type == "cuda" for p in net.parameters())
    assert all(not torch.equal(a, p) for a, p in zip(before, net.parameters()))
    assert engine.get_epsilon(1e-5) > 0
