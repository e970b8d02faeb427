"""Calibrate a (simulated) OPU, plan the operating point for a privacy target, then train your own
model by DP-DFA with the calibrated device's noise.

    python examples/calibrate_then_train.py [--quick] [--out cal.json]
"""

import argparse
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from trainers.api import PrivacyEngine, calibrate, calibrated_device, plan

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--quick", action="store_true", help="a small run (seconds)")
parser.add_argument("--out", help="calibration file to write (default: a temporary folder)")
args = parser.parse_args()
n, epochs, batch = (1024, 1, 64) if args.quick else (20000, 5, 128)
out = Path(args.out or Path(tempfile.mkdtemp()) / "opu-sim-dp.cal.json")

# opu-sim-dp's privacy anchor is speckle: its per-pixel bound map holds at the temperature it was
# measured at (the profile's 25 C), so the calibration and the plan stay there
settings = dict(frames=8, bootstrap=50) if args.quick else {}
calibrate("opu-sim-dp", out=out, temperatures=[25.0], **settings)
model = nn.Sequential(nn.Linear(20, 64), nn.Sigmoid(), nn.Linear(64, 10))
# a photon-transfer calibration cannot prove unity gain (its interval is far wider than 1e-4 at
# saturation), so the counts are planned digitized: accounted from the read's calibrated law
best = plan(
    out, "opu-sim-dp", 3.0, 1e-5, dataset_size=n, batch_size=batch, epochs=epochs, model=model, mechanism="digitized"
)[0]
print(
    f"calibration {out}; best point {best.temperature_c:g} C, {best.exposure_us:g} us: "
    f"{best.reads_per_value} read(s) per count, {best.time_s:.3g} s of camera time, "
    f"reaches target: {best.reaches_target}"
)

g = torch.Generator().manual_seed(0)
centers = torch.randn(10, 20, generator=g)
y = torch.randint(0, 10, (n,), generator=g)
x = centers[y] + 0.6 * torch.randn(n, 20, generator=g)
device = calibrated_device("opu-sim-dp", out)
device.set_options(temperature_c=best.temperature_c)
engine = PrivacyEngine()
model, optimizer, loader = engine.make_private_with_epsilon(
    module=model,
    optimizer=torch.optim.Adam(model.parameters(), lr=1e-2),
    data_loader=(x, y),
    batch_size=batch,
    target_epsilon=3.0,
    target_delta=1e-5,
    epochs=epochs,
    max_grad_norm=0.1,
    method="dp-dfa",
    noise_source="device",
    opu=device,
)
for _epoch in range(epochs):
    for xb, yb in loader:
        optimizer.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        optimizer.step()
print(
    f"trained with the calibrated device ({device.noise_report().source} noise): {engine.steps} steps, "
    f"epsilon {engine.get_epsilon(1e-5):.3f} at delta 1e-5"
)
