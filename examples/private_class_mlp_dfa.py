"""Your own MLP written as a class (functional activations), trained by DP-DFA with the (simulated)
OPU's noise, from a torch DataLoader: feedback enters at fc2 and out, found by tracing forward().

python examples/private_class_mlp_dfa.py [--quick]
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from trainers.api import PrivacyEngine

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--quick", action="store_true", help="a small run (seconds)")
n, epochs = (1024, 2) if parser.parse_args().quick else (20000, 5)

g = torch.Generator().manual_seed(0)  # your data: here, Gaussian clusters
centers = torch.randn(10, 20, generator=g)
y = torch.randint(0, 10, (n + 1000,), generator=g)
x = centers[y] + 0.6 * torch.randn(n + 1000, 20, generator=g)
train, (x_test, y_test) = TensorDataset(x[:n], y[:n]), (x[n:], y[n:])


class MLP(nn.Module):  # the user code starts here: 21 lines with the loop and the evaluation
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.out = nn.Linear(20, 128), nn.Linear(128, 64), nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.fc2(torch.tanh(self.fc1(x)))))


model = MLP()
engine = PrivacyEngine()
model, optimizer, loader = engine.make_private_with_epsilon(
    module=model, optimizer=torch.optim.Adam(model.parameters(), lr=3e-2),
    data_loader=DataLoader(train, batch_size=64), target_epsilon=3.0, target_delta=1e-5, epochs=epochs,
    max_grad_norm=0.1, tau_h=5.0, method="dp-dfa", noise_source="device", opu="opu-sim-dp", lattice_resolution=20,
)  # fmt: skip
for _epoch in range(epochs):
    for xb, yb in loader:  # no training loss printed: it is an un-noised statistic of private data
        optimizer.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        optimizer.step()
with torch.no_grad():
    accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
print(f"epsilon {engine.get_epsilon(1e-5):.3f} at delta 1e-5, {engine.steps} steps; held-out accuracy {accuracy:.3f}")
