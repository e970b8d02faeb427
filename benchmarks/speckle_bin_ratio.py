"""The digitized speckle law's bin ratio at the main job's shape: bins, grid cameras, epsilon at 1 read per
count and the seconds to account it, per ratio (:mod:`opu_hal.contract.speckle_bins`), all in one run
(each ratio's cameras are new; a ratio whose bins equal an earlier one's reuses its cached curves).

    python -m benchmarks.speckle_bin_ratio --calibration CAL [--ratios 2 1.5 1.25]

CAL: ``opu-hal calibrate opu-sim-dp --temperatures 25 --exposures 400 --out CAL`` (as scripts/main.sh).
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import opu_hal
from opu_hal.calibration.calibrated import load_calibrated_noise
from opu_hal.contract.speckle_bins import select_binned
from opu_hal.privacy.accountant import Accountant
from opu_hal.privacy.digitized_lattice import DigitizedLattice
from opu_hal.privacy.skellam import SkellamLattice

DIMENSION, DATASET, BATCH, STEPS, K, DELTA = 1_018_890, 54_000, 2048, 520, 23.0, 1e-5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibration", required=True)
    parser.add_argument("--profile", default="opu-sim-dp")
    parser.add_argument("--ratios", type=float, nargs="+", default=[2.0, 1.5, 1.25])
    args = parser.parse_args()
    device = opu_hal.load_device(args.profile)
    noise = load_calibrated_noise(args.calibration, device.profile)
    device.attach_calibration(noise)
    device.set_options(speckle_values_per_draw=DIMENSION)
    law = device.digitized_read_law()
    bounds = noise.anchor_map(device.profile.temperature_c, device.profile.exposure_us)
    for ratio in args.ratios:
        selection = select_binned(bounds, noise.clip_ceiling_e(), values=DIMENSION, ratio=ratio)
        binned = dataclasses.replace(law, mean_bins=selection.bins)
        lattice = DigitizedLattice(SkellamLattice(DIMENSION, 1.0, K, "per-coordinate"), binned)
        wall, cpu = time.perf_counter(), time.process_time()
        accountant = Accountant("replace_one")
        accountant.step(lattice.event_for_reads(DATASET, BATCH, 1), STEPS)
        epsilon = accountant.get_epsilon(DELTA)
        print(
            f"ratio {ratio:g}: {len(selection.bins)} bin(s), {len(lattice.cameras)} grid cameras, epsilon "
            f"{epsilon:.4f} at 1 read per count; {time.perf_counter() - wall:.1f} s wall, "
            f"{time.process_time() - cpu:.1f} s CPU",
            flush=True,
        )


if __name__ == "__main__":
    main()
