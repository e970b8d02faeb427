"""One camera frame on the CPU, compiled: exact Poisson counts (:mod:`.poisson`), then full well,
Gaussian read noise (:mod:`.normal`), ADC rounding and range, as ``Sensor._digitize`` in float32.

About 3x faster than ``torch.poisson`` plus the eager digitization on the 2-core machine
(``python -m benchmarks.camera_kernel``); each frame draws one Philox key from the camera's seeded
``torch.Generator``, so the generator still fixes the frames.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from numba import njit, prange

from .normal import standard_normals
from .philox import WORKSPACE, compute_threads, key_words
from .poisson import flat_frame_counts, poisson_counts


@njit(inline="always", cache=True)
def adc_electrons(count, normal, has_noise, well, sigma, gain, black, top):
    """One pixel of ``Sensor._digitize`` in float32, before the dark subtraction: (electrons, clipped)."""
    electrons = np.float32(count)
    hit = electrons > well
    electrons = min(electrons, well)
    if has_noise:
        electrons = electrons + sigma * np.float32(normal)
    dn = np.float32(np.rint(electrons / gain)) + black
    hit = hit | (dn < 0) | (dn > top)
    dn = min(max(dn, np.float32(0.0)), top)
    return (dn - black) * gain, hit


@njit(inline="always", cache=True)
def adc_settings(dark, normals, full_well, read_noise, gain, black, max_dn):
    """What :func:`adc_electrons` takes, in float32 (full well, read noise, gain, black level, top
    code), after the row width (``dark``'s length) and whether read noise is drawn (``normals`` not empty)."""
    return (
        dark.shape[0],
        normals.shape[0] > 0,
        np.float32(full_well),
        np.float32(read_noise),
        np.float32(gain),
        np.float32(black),
        np.float32(max_dn),
    )


@njit(parallel=True, cache=True)
def digitize(counts, normals, dark, full_well, read_noise, gain, black, max_dn, out):
    """``Sensor._digitize`` in float32, row by row (``dark`` per column; no read noise when
    ``normals`` is empty); returns the number of clipped pixels."""
    columns, has_noise, well, sigma, gain32, black32, top = adc_settings(
        dark, normals, full_well, read_noise, gain, black, max_dn
    )
    clipped = 0
    for row in prange(counts.shape[0] // columns):
        for column in range(columns):
            i = row * columns + column
            normal = normals[i] if has_noise else 0.0
            electrons, hit = adc_electrons(counts[i], normal, has_noise, well, sigma, gain32, black32, top)
            out[i] = electrons - dark[column]
            clipped += np.int64(hit)
    return clipped


def camera_read(
    rates: torch.Tensor, dark_e: torch.Tensor | float, generator: torch.Generator, **adc: float
) -> tuple[torch.Tensor, int]:
    """Dark-subtracted electrons of one frame (float32, ``rates``' shape) and its clipped-pixel count.

    ``rates``: mean electrons per pixel, signal plus dark (a CPU tensor); ``dark_e``: the mean dark
    electrons subtracted at readout (a float, or one per pixel of the last dimension); ``adc``:
    ``full_well_e``, ``read_noise_e``, ``gain_e_per_dn``, ``black_level_dn``, ``max_dn``."""
    flat = rates.detach().reshape(-1).to(torch.float64).contiguous().numpy()
    return _read(
        lambda k0, k1, dark, counts: poisson_counts(flat, k0, k1, counts), tuple(rates.shape), dark_e, generator, adc
    )


def camera_read_flat(
    signal_e: float, shape: tuple[int, ...], dark_e: torch.Tensor | float, generator: torch.Generator, **adc: float
) -> tuple[torch.Tensor, int]:
    """:func:`camera_read` of a flat field of ``signal_e`` electrons at every pixel, plus the dark
    signal (:func:`.poisson.flat_frame_counts`)."""
    if not (math.isfinite(signal_e) and signal_e >= 0):
        raise ValueError(f"a flat field of {signal_e} electrons: must be finite and >= 0")
    rows = math.prod(shape[:-1]) if shape else 1
    return _read(
        lambda k0, k1, dark, counts: flat_frame_counts(signal_e, dark.astype(np.float64), rows, k0, k1, counts),
        shape,
        dark_e,
        generator,
        adc,
    )


def _read(
    draw_counts: Callable[..., np.ndarray],
    shape: tuple[int, ...],
    dark_e: torch.Tensor | float,
    generator: torch.Generator,
    adc: dict[str, float],
) -> tuple[torch.Tensor, int]:
    """Counts from ``draw_counts(k0, k1, dark, counts)`` under a key from ``generator``, then digitized."""
    numel = frame_size(shape)
    dark = dark_columns(dark_e, shape[-1] if shape else 1)
    k0, k1 = key_words(generator)
    read_noise = float(adc["read_noise_e"])
    out = torch.empty(numel, dtype=torch.float32)
    with compute_threads():
        counts = draw_counts(k0, k1, dark, WORKSPACE.array("counts", numel, np.float64))
        normals = (
            standard_normals(numel, k0, k1, WORKSPACE.array("normals", numel, np.float64))
            if read_noise > 0
            else np.empty(0)
        )
        clipped = digitize(
            counts,
            normals,
            dark,
            float(adc["full_well_e"]),
            read_noise,
            float(adc["gain_e_per_dn"]),
            float(adc["black_level_dn"]),
            float(adc["max_dn"]),
            out.numpy(),
        )
    return out.view(shape), int(clipped)


def dark_columns(dark_e: torch.Tensor | float, columns: int) -> np.ndarray:
    """The mean dark electrons of each column (float32), from one value or a per-pixel map."""
    dark = (
        dark_e.detach().reshape(-1).float().contiguous()
        if isinstance(dark_e, torch.Tensor)
        else torch.full((columns,), float(dark_e))
    )
    if dark.numel() != columns:
        raise ValueError(f"dark map has {dark.numel()} pixels, the frame's rows {columns}")
    return dark.numpy()


def frame_size(shape: tuple[int, ...]) -> int:
    """The number of pixels of a frame, refused from 2^31 on (pixels are numbered by int32)."""
    numel = math.prod(shape)
    if numel >= 2**31:
        raise ValueError(f"a frame of {numel} pixels: pixels are numbered by int32 (at most 2^31 - 1)")
    return numel
