"""Your own MLP on your own tensors, trained by DP-DFA with the (simulated) OPU's noise.

python examples/private_own_mlp.py [--quick]
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

from trainers.api import PrivacyEngine

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--quick", action="store_true", help="a small run (seconds)")
n, epochs = (1024, 2) if parser.parse_args().quick else (20000, 5)

g = torch.Generator().manual_seed(0)  # your data: here, Gaussian clusters
centers = torch.randn(10, 20, generator=g)
y = torch.randint(0, 10, (n + 1000,), generator=g)
x = centers[y] + 0.6 * torch.randn(n + 1000, 20, generator=g)
x_train, y_train, x_test, y_test = x[:n], y[:n], x[n:], y[n:]

model = nn.Sequential(nn.Linear(20, 128), nn.Sigmoid(), nn.Linear(128, 10))
optimizer = torch.optim.Adam(model.parameters(), lr=3e-2)
engine = PrivacyEngine()
model, optimizer, loader = engine.make_private_with_epsilon(
    module=model,
    optimizer=optimizer,
    data_loader=(x_train, y_train),
    batch_size=64,
    target_epsilon=3.0,
    target_delta=1e-5,
    epochs=epochs,
    max_grad_norm=0.1,
    method="dp-dfa",
    noise_source="device",
    opu="opu-sim-dp",
    lattice_resolution=20,
)
for _epoch in range(epochs):
    for xb, yb in loader:  # no training loss printed: it is an un-noised statistic of private data
        optimizer.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        optimizer.step()
with torch.no_grad():
    accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
print(
    f"noise multiplier {engine.noise_multiplier:.3f}, {engine.steps} steps, "
    f"epsilon {engine.get_epsilon(1e-5):.3f} at delta 1e-5; held-out accuracy {accuracy:.3f}"
)
