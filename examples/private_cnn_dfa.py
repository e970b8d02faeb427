"""Your own small CNN written as a class (two conv + GroupNorm blocks, a linear head), trained by DP-DFA
with the (simulated) OPU's noise on FashionMNIST: feedback enters at the head's Linear layers, and the
conv blocks learn by paper 002's hybrid BP/DFA (backprop of fc1's DFA signal, clipped per example).

python examples/private_cnn_dfa.py [--quick]
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

from trainers.api import PrivacyEngine
from trainers.core.data import load_dataset

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--quick", action="store_true", help="a small run (seconds)")
quick = parser.parse_args().quick  # quick: 16 steps, so a larger step size
n, epochs, batch, lr, n_test = (2048, 2, 256, 3e-2, 2000) if quick else (54000, 3, 1024, 1e-2, 10000)
data = load_dataset("fashion-mnist")  # pixels in [0, 1]; the test split is held out
x, y = ((data.train.x[:n] - 0.286) / 0.353).view(-1, 1, 28, 28), data.train.y[:n]
x_test, y_test = ((data.test.x[:n_test] - 0.286) / 0.353).view(-1, 1, 28, 28), data.test.y[:n_test]
torch.manual_seed(0)


class CNN(nn.Module):  # the user code starts here: 24 lines with the loop and the evaluation
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.norm1 = nn.Conv2d(1, 8, 3, padding=1), nn.GroupNorm(4, 8)
        self.conv2, self.norm2 = nn.Conv2d(8, 16, 3, padding=1), nn.GroupNorm(4, 16)
        self.fc1, self.out = nn.Linear(16 * 7 * 7, 128), nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.avg_pool2d(torch.tanh(self.norm1(self.conv1(x))), 2)
        x = F.avg_pool2d(torch.tanh(self.norm2(self.conv2(x))), 2)
        return self.out(torch.tanh(self.fc1(x.flatten(1))))


model, engine = CNN(), PrivacyEngine()
model, optimizer, loader = engine.make_private_with_epsilon(
    module=model, optimizer=torch.optim.Adam(model.parameters(), lr=lr), data_loader=(x, y), batch_size=batch,
    target_epsilon=3.0, target_delta=1e-5, epochs=epochs, max_grad_norm=0.05, tau_h=5.0, method="dp-dfa",
    noise_source="device", opu="opu-sim-dp", layers=["fc1", "out"],
)  # fmt: skip
for _epoch in range(epochs):
    for xb, yb in loader:  # no training loss printed: it is an un-noised statistic of private data
        optimizer.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        optimizer.step()
with torch.no_grad():
    accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
print(f"epsilon {engine.get_epsilon(1e-5):.3f} at delta 1e-5, {engine.steps} steps; test accuracy {accuracy:.3f}")
