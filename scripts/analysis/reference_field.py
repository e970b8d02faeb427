"""What the linear mode's speckle reference does to a simulated OPU's noise. Run from the repository root:

    python -m scripts.analysis.reference_field [--profile opu-sim-privacy] [--batches 20]

For the profile as shipped, with every pixel read (``reference_band = [0, 50]``) and with a flat reference
beam (``reference_field = "flat"``, the model before), it prints the declared ``std`` and ``std_lower`` of
an input with half the mirrors on at three temperatures, the clipped reads of ``--batches`` dense
batches of 256 at the hottest, and the mean, smallest and largest reference intensity of the pixels read
(:mod:`opu_hal.backends.simulated.reference`).
"""

from __future__ import annotations

import argparse
import warnings

import torch

import opu_hal
from opu_hal.backends.simulated.device import SimulatedDevice
from opu_hal.contract.errors import ProfileError


def variants() -> dict[str, dict]:
    return {
        "as shipped": {},
        "every pixel": {"reference_band": [0.0, 50.0]},
        "flat beam": {"reference_band": None, "reference_field": "flat"},
    }


def clipped_reads(device: SimulatedDevice, batches: int) -> int:
    device.saturated_pixels = 0
    for seed in range(batches):
        x = (torch.rand(256, device.in_features, generator=torch.Generator().manual_seed(seed)) < 0.5).float()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            device.project(x)
    return device.saturated_pixels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="opu-sim-privacy")
    parser.add_argument("--batches", type=int, default=20)
    args = parser.parse_args()
    base = opu_hal.load_profile(args.profile)
    low, high = base.temperature_min_c, base.temperature_max_c  # type: ignore[attr-defined]
    temperatures = (low, (low + high) / 2, high)
    print(f"{args.profile}: std / std_lower of an input with half the mirrors on (output units)")
    print(
        "| reference | "
        + " | ".join(f"{t:g} C" for t in temperatures)
        + " | clipped reads, hottest | s mean [min, max] |"
    )
    print("| --- " * (len(temperatures) + 3) + "|")
    for label, update in variants().items():
        try:
            device = opu_hal.load_device(base.model_copy(update=update))
        except ProfileError as exc:  # e.g. rounding not dithered at the dimmest reference pixel
            print(f"| {label} | refused: {exc} |")
            continue
        assert isinstance(device, SimulatedDevice)
        cells = []
        for t in temperatures:
            device.set_options(temperature_c=t)
            report = device.noise_report()
            cells.append(f"{report.std:.4f} / {report.std_lower:.4f}")
        reads = 3 * 256 * device.out_features * args.batches
        s = device.reference.intensity
        spread = f"{float(s.mean()):.2f} [{float(s.min()):.2g}, {float(s.max()):.2f}]"
        print(f"| {label} | " + " | ".join(cells) + f" | {clipped_reads(device, args.batches)} of {reads} | {spread} |")


if __name__ == "__main__":
    main()
