"""DFA on your own nn.Sequential in a plain torch loop: ``loss.backward()`` delivers the DFA update
(Nokland 2016); ``--method pdfa`` projects the ternarized error on the simulated OPU.

    python examples/dfa_own_model.py [--quick] [--method dfa|tdfa|pdfa]
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

from trainers.api import attach_dfa, dfa_alignment

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--quick", action="store_true", help="a small run (seconds)")
parser.add_argument("--method", choices=["dfa", "tdfa", "pdfa"], default="pdfa")
args = parser.parse_args()
n, epochs = (1024, 2) if args.quick else (20000, 10)

g = torch.Generator().manual_seed(0)
centers = torch.randn(10, 20, generator=g)
y = torch.randint(0, 10, (n,), generator=g)
x = centers[y] + 0.6 * torch.randn(n, 20, generator=g)
loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(x, y), batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(1)
)

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(20, 256), nn.Tanh(), nn.Linear(256, 128), nn.Tanh(), nn.Linear(128, 10))
dfa = attach_dfa(model, args.method, opu="opu-sim" if args.method == "pdfa" else "torch-cpu")
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for epoch in range(epochs):
    total = 0.0
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()  # .grad now holds the DFA update
        optimizer.step()
        total += loss.item() * len(yb)
    cosines = dfa_alignment(dfa, x[:256], y[:256])
    print(
        f"epoch {epoch + 1}: loss {total / n:.4f}; alignment with backprop "
        + ", ".join(f"layer {k} {v:.2f}" for k, v in cosines.items())
    )
