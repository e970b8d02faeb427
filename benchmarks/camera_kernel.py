"""The fused camera-frame kernel (:mod:`opu_hal.triton_camera`) against the eager torch frame, on CUDA.

    python -m benchmarks.camera_kernel

One frame of 256 x 16384 pixels of speckle (exponential intensities, mean 101 e-, as a linear-mode
projection's signal frame on ``opu-sim``), dark map on: the median time of the kernel at several
block sizes, and of the eager path (:func:`opu_hal.poisson.poisson` plus ``Sensor._digitize``).
"""

from __future__ import annotations

import torch

from benchmarks.simulated_projection import simulated
from benchmarks.timing import median_seconds


def main() -> None:
    if not torch.cuda.is_available():
        print("needs CUDA: torch sees no GPU")
        return
    from opu_hal import triton_camera
    from opu_hal.poisson import poisson

    device = simulated(784, 16384, compute="cuda")
    sensor = device.sensor
    generator = torch.Generator("cuda").manual_seed(0)
    signal = torch.empty(256, 16384, device="cuda").exponential_(1 / 101.0, generator=generator)
    settings = dict(full_well_e=sensor.full_well_e, read_noise_e=sensor.read_noise_e, gain_e_per_dn=sensor.gain_e_per_dn,
                    black_level_dn=sensor.black_level_dn, max_dn=sensor.max_dn)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, frame {tuple(signal.shape)}")
    for block in (64, 128, 256, 512):
        seconds = median_seconds(lambda: triton_camera.camera_read(
            signal, tuple(signal.shape), sensor.pixel_dark_e, generator, signal.device, block=block, **settings))
        print(f"  fused kernel, block {block:>3}: {seconds * 1e3:7.3f} ms")
    eager = median_seconds(lambda: sensor._digitize(poisson(signal + sensor.pixel_dark_e, generator), generator))
    print(f"  eager torch frame:       {eager * 1e3:7.3f} ms")


if __name__ == "__main__":
    main()
