"""A CNN with normalisation layers trained by DP-SGD on FashionMNIST, through the Opacus-style API:
the BatchNorm an Opacus user brings is refused (it mixes the examples of a batch), so
``ModuleValidator.fix`` swaps it for GroupNorm first.

python examples/private_cnn_groupnorm.py [--quick]
"""

import argparse
import warnings

import torch
import torch.nn.functional as F
from torch import nn

from trainers.api import ModuleValidator, PrivacyEngine
from trainers.core.data import load_dataset

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--quick", action="store_true", help="a small run (seconds)")
quick = parser.parse_args().quick
n, epochs, width, batch, n_test = (1024, 2, 8, 64, 2000) if quick else (54000, 5, 32, 256, 10000)

data = load_dataset("fashion-mnist")  # pixels in [0, 1]; the test split is held out
x_train = ((data.train.x[:n] - 0.286) / 0.353).view(-1, 1, 28, 28)
x_test = ((data.test.x[:n_test] - 0.286) / 0.353).view(-1, 1, 28, 28)
y_train, y_test = data.train.y[:n], data.test.y[:n_test]

torch.manual_seed(0)
model = nn.Sequential(
    nn.Conv2d(1, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(), nn.AvgPool2d(2),
    nn.Conv2d(width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(), nn.AvgPool2d(2),
    nn.Flatten(), nn.Linear(2 * width * 49, 10),
)  # fmt: skip
print("refused:", ModuleValidator.validate(model)[0])
with warnings.catch_warnings(record=True) as replaced:
    warnings.simplefilter("always")
    model = ModuleValidator.fix(model)  # BatchNorm2d -> GroupNorm
print(replaced[0].message)

engine = PrivacyEngine()
model, optimizer, loader = engine.make_private_with_epsilon(
    module=model,
    optimizer=torch.optim.Adam(model.parameters(), lr=2e-3),
    data_loader=(x_train, y_train),
    batch_size=batch,
    target_epsilon=3.0,
    target_delta=1e-5,
    epochs=epochs,
    max_grad_norm=1.0,
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
    f"epsilon {engine.get_epsilon(1e-5):.3f} at delta 1e-5; test accuracy {accuracy:.3f}"
)
