"""One camera frame: the compiled CPU kernels (:mod:`opu_hal.kernels.compiled`) and the fused GPU kernel
(:mod:`opu_hal.kernels.triton_camera`), each against the eager torch frame on the same device.

    python -m benchmarks.camera_kernel

Frames of speckle (exponential intensities, mean 101 e-, as a linear-mode projection's signal frame
on ``opu-sim``) and of the flat anchor (202.7 e-), dark map on. CPU: 256 x 1024 pixels, the
compiled frame against ``torch.poisson`` plus ``Sensor._digitize`` (the CPU path before the
compiled kernels). CUDA, when present: 256 x 16384 pixels, the fused kernel at several block sizes
against :func:`opu_hal.kernels.poisson.poisson` plus ``Sensor._digitize``.
"""

from __future__ import annotations

import torch

from benchmarks.simulated_projection import simulated
from benchmarks.timing import median_seconds
from opu_hal.runtime.compute import NO_NUMBA_ENV, compiled_ready

SPECKLE_MEAN_E = 101.0


def cpu_frames() -> None:
    if not compiled_ready(torch.device("cpu")):
        print(f"CPU: the compiled camera is off (Numba not installed, or {NO_NUMBA_ENV} set)")
        return
    device = simulated(10, 1024, compute="cpu")
    sensor = device.sensor
    generator = torch.Generator().manual_seed(0)
    signal = torch.empty(256, 1024).exponential_(1 / SPECKLE_MEAN_E, generator=generator)
    print(f"torch {torch.__version__}, CPU, {torch.get_num_threads()} threads, frame {tuple(signal.shape)}")
    compiled = median_seconds(lambda: sensor.read(signal, generator), repeats=21)
    eager = median_seconds(
        lambda: sensor._digitize(torch.poisson(signal + sensor.pixel_dark_e, generator=generator), generator),
        repeats=21,
    )
    flat = median_seconds(lambda: sensor.read_flat(device.anchor_e, tuple(signal.shape), generator, "cpu"), repeats=21)
    anchor = torch.full(signal.shape, device.anchor_e)
    eager_flat = median_seconds(
        lambda: sensor._digitize(torch.poisson(anchor + sensor.pixel_dark_e, generator=generator), generator),
        repeats=21,
    )
    print(f"  speckle frame: compiled {compiled * 1e3:6.2f} ms, eager {eager * 1e3:6.2f} ms ({eager / compiled:.1f}x)")
    print(
        f"  anchor frame:  compiled {flat * 1e3:6.2f} ms, eager {eager_flat * 1e3:6.2f} ms ({eager_flat / flat:.1f}x)"
    )


def cuda_frames() -> None:
    from opu_hal.kernels import triton_camera
    from opu_hal.kernels.poisson import poisson

    device = simulated(784, 16384, compute="cuda")
    sensor = device.sensor
    generator = torch.Generator("cuda").manual_seed(0)
    signal = torch.empty(256, 16384, device="cuda").exponential_(1 / SPECKLE_MEAN_E, generator=generator)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, frame {tuple(signal.shape)}")
    for block in (64, 128, 256, 512):
        seconds = median_seconds(
            lambda block=block: triton_camera.camera_read(
                signal, tuple(signal.shape), sensor.pixel_dark_e, generator, signal.device, block=block, **sensor._adc
            )
        )
        print(f"  fused kernel, block {block:>3}: {seconds * 1e3:7.3f} ms")
    eager = median_seconds(lambda: sensor._digitize(poisson(signal + sensor.pixel_dark_e, generator), generator))
    print(f"  eager torch frame:       {eager * 1e3:7.3f} ms")


def main() -> None:
    cpu_frames()
    if torch.cuda.is_available():
        cuda_frames()
    else:
        print("CUDA: torch sees no GPU (the fused kernel's timing needs one)")


if __name__ == "__main__":
    main()
