"""The three frames of a linear-mode projection on the CPU, compiled and fused.

:meth:`opu_hal.backends.simulated.camera.Sensor.read_linear` reads ``e_2 = frame(|z|^2)``,
``e_1 = frame(|z + a|^2)`` and ``e_3 = frame(|a|^2)`` and returns ``e_1 - e_2 - e_3`` (the module
docstring of :mod:`opu_hal.backends.simulated.device`). Here the two per-pixel means come from one
pass over the field, the counts and normals from :mod:`.poisson` and :mod:`.normal` under one key
per frame (drawn in the order of the three separate reads), and the three digitizations and their
difference from one pass: the same values, bit for bit, as three :func:`.camera.camera_read` calls,
without the element-wise passes between them.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from numba import njit, prange

from .camera import adc_electrons, adc_settings, dark_columns, frame_size
from .normal import standard_normals
from .philox import WORKSPACE, compute_threads, key_words
from .poisson import flat_frame_counts, poisson_counts


@njit(parallel=True, cache=True)
def _rates(real, imag, cos, sin, amplitude, dark, inverse, signal_rates, anchor_rates):
    """``|z|^2 + D_j`` and ``|z + a|^2 + D_j`` in float32 (as torch computes them), stored as float64;
    returns the two frames' summed signal (float64), as it is and each pixel's times ``inverse[j]``,
    for the noise report (``1 / s_j`` under a speckle reference, else ones)."""
    columns = dark.shape[0]
    total = 0.0
    weighted = 0.0
    for row in prange(real.shape[0] // columns):
        for column in range(columns):
            i = row * columns + column
            re, im = real[i], imag[i]
            signal = re * re + im * im
            shifted_re = re + amplitude * cos[column]
            shifted_im = im + amplitude * sin[column]
            with_anchor = shifted_re * shifted_re + shifted_im * shifted_im
            signal_rates[i] = signal + dark[column]
            anchor_rates[i] = with_anchor + dark[column]
            frames = np.float64(signal) + np.float64(with_anchor)
            total += frames
            weighted += frames * inverse[column]
    return total, weighted


@njit(parallel=True, cache=True)
def _digitize_difference(
    anchor_counts,
    signal_counts,
    flat_counts_,
    anchor_normals,
    signal_normals,
    flat_normals,
    dark,
    full_well,
    read_noise,
    gain,
    black,
    max_dn,
    out,
):
    """``e_1 - e_2 - e_3`` with each frame digitized and dark-subtracted as ``Sensor._digitize``;
    returns the clipped reads of the three frames."""
    clipped = 0
    columns, has_noise, well, sigma, gain32, black32, top = adc_settings(
        dark, anchor_normals, full_well, read_noise, gain, black, max_dn
    )
    for row in prange(anchor_counts.shape[0] // columns):
        for column in range(columns):
            i = row * columns + column
            n1 = anchor_normals[i] if has_noise else 0.0
            n2 = signal_normals[i] if has_noise else 0.0
            n3 = flat_normals[i] if has_noise else 0.0
            e1, hit1 = adc_electrons(anchor_counts[i], n1, has_noise, well, sigma, gain32, black32, top)
            e2, hit2 = adc_electrons(signal_counts[i], n2, has_noise, well, sigma, gain32, black32, top)
            e3, hit3 = adc_electrons(flat_counts_[i], n3, has_noise, well, sigma, gain32, black32, top)
            d = dark[column]
            out[i] = ((e1 - d) - (e2 - d)) - (e3 - d)
            clipped += np.int64(hit1) + np.int64(hit2) + np.int64(hit3)
    return clipped


def anchor_frame_counts(
    anchor_e: float,
    intensity: torch.Tensor | None,
    dark_e: torch.Tensor | float,
    dark: np.ndarray,
    rows: int,
    key: tuple[np.uint32, np.uint32],
    counts: np.ndarray,
) -> np.ndarray:
    """The anchor-only frame's counts: one mean for a flat beam, else each pixel's ``anchor_e s_j + D_j``
    computed as the separate read computes it (float32 light plus the dark map, then float64)."""
    if intensity is None:
        return flat_frame_counts(float(anchor_e), dark.astype(np.float64), rows, *key, counts)
    means = ((anchor_e * intensity).to(torch.float32) + dark_e).to(torch.float64).numpy()
    return poisson_counts(np.tile(means, rows), *key, counts)


def linear_frames(
    real: torch.Tensor,
    imag: torch.Tensor,
    anchor_cos: torch.Tensor,
    anchor_sin: torch.Tensor,
    anchor_e: float,
    dark_e: torch.Tensor | float,
    generator: torch.Generator,
    intensity: torch.Tensor | None = None,
    **adc: float,
) -> tuple[torch.Tensor, int, float, float]:
    """``(e_1 - e_2 - e_3, clipped reads, mean of |z + a|^2 + |z|^2, the same over s_j)`` for the camera field ``real``,
    ``imag`` (float32, ``(rows, pixels)``, in sqrt(electrons)) and the anchor of ``anchor_e``
    electrons with phases ``anchor_cos``, ``anchor_sin`` (one per pixel). ``intensity``: a speckle
    reference's ``s_j`` (``anchor_cos``, ``anchor_sin`` then carry its amplitude): the anchor frame is
    read at each pixel's ``anchor_e s_j``, as three separate reads would, and the last mean is of
    ``(|z + a|^2 + |z|^2) / s_j`` (the first mean again for a flat beam)."""
    shape = tuple(real.shape)
    rows, columns = (math.prod(shape[:-1]), shape[-1]) if shape else (1, 1)
    numel = frame_size(shape)
    dark = dark_columns(dark_e, columns)
    keys = [key_words(generator) for _ in range(3)]  # the order of Sensor.read_linear's three reads
    read_noise = float(adc["read_noise_e"])
    out = torch.empty(numel, dtype=torch.float32)
    fields = [t.detach().reshape(-1).float().contiguous().numpy() for t in (real, imag)]
    phases = [t.detach().float().contiguous().numpy() for t in (anchor_cos, anchor_sin)]

    def buffer(name: str) -> np.ndarray:
        return WORKSPACE.array(name, numel, np.float64)

    with compute_threads():
        signal_rates, anchor_rates = buffer("signal_rates"), buffer("anchor_rates")
        # numba's stubs give a @njit dispatcher's __call__ a fixed arity
        inverse = np.ones(columns) if intensity is None else (1.0 / intensity.double()).numpy()
        total, weighted = _rates(
            *fields,
            *phases,
            np.float32(math.sqrt(anchor_e)),
            dark,  # type: ignore[call-arg]
            inverse,
            signal_rates,
            anchor_rates,
        )
        counts = [
            poisson_counts(signal_rates, *keys[0], buffer("signal_counts")),
            poisson_counts(anchor_rates, *keys[1], buffer("anchor_counts")),
            anchor_frame_counts(anchor_e, intensity, dark_e, dark, rows, keys[2], buffer("flat_counts")),
        ]
        normals = (
            [standard_normals(numel, *key, buffer(f"normals{j}")) for j, key in enumerate(keys)]
            if read_noise > 0
            else [np.empty(0)] * 3
        )
        clipped = _digitize_difference(
            counts[1],
            counts[0],
            counts[2],
            normals[1],
            normals[0],
            normals[2],
            dark,
            float(adc["full_well_e"]),
            read_noise,
            float(adc["gain_e_per_dn"]),
            float(adc["black_level_dn"]),
            float(adc["max_dn"]),
            out.numpy(),
        )
    return out.view(shape), int(clipped), total / max(numel, 1), weighted / max(numel, 1)
