"""One camera frame in one GPU kernel (Triton): exact Poisson counts, full well, read noise, ADC.

:meth:`opu_hal.backends.simulated.camera.Sensor.read` in eager torch costs a few dozen kernel
launches and, for the Poisson counts off the CPU, a rejection loop with a host synchronization per
round (about 11 ms a frame on an H100, launch-bound). This kernel does the same per pixel, with the
same algorithms as :mod:`opu_hal.kernels.poisson`:

- counts: PTRS (Hoermann 1993, numpy's ``random_poisson_ptrs``) for means >= 10, inversion by
  sequential search below, both in float64 with 53-bit uniforms; ``log k!`` by numpy's
  ``random_loggam`` (Stirling series, shifted below 7), so the acceptance test is exact up to
  float64 rounding, as on the CPU;
- then the full-well clip, Gaussian read noise (Box-Muller), ADC rounding (half to even, as
  ``torch.round``) and range, and the return to dark-subtracted electrons, as ``Sensor._digitize``.

Uniforms come from Philox4x32-10 counters ``(pixel, round)`` under a 64-bit key read from device
memory, so a launch needs no host synchronization; the key is drawn from the camera's seeded
``torch.Generator``, which therefore still fixes the frames. This is training-quality noise of the
simulated physics, never privacy noise (that comes from :mod:`opu_hal.randomness.secure_random`).

This module imports Triton: import it only where :func:`opu_hal.gpu.triton_ready` says so
(CUDA present and Triton installed); elsewhere callers keep the eager path.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

BLOCK = 128  # one pixel per thread at 4 warps: the while loops hold many float64 values
# Philox counters are (pixel, c1, 0, 0): PTRS round r uses c1 = r, the inversion's uniform
# c1 = 0xFFFFFFFF and the read noise's normal c1 = 0xFFFFFFFE, so no two draws share a counter.


@triton.jit
def uniform53(hi, lo):
    """A float64 uniform in [0, 1) from two uint32 words (numpy's 53-bit construction)."""
    return ((hi >> 5).to(tl.float64) * 67108864.0 + (lo >> 6).to(tl.float64)) * (1.0 / 9007199254740992.0)


@triton.jit
def loggam(x):
    """``log Gamma(x)`` for x >= 1, numpy's ``random_loggam``: the series at x + n >= 7."""
    n = tl.where(x < 7.0, tl.floor(7.0 - x), 0.0)
    x0 = x + n
    x2 = (1.0 / x0) * (1.0 / x0)
    gl0 = -1.39243221690590e00
    gl0 = gl0 * x2 + 1.796443723688307e-01
    gl0 = gl0 * x2 - 2.955065359477124e-02
    gl0 = gl0 * x2 + 6.410256410256410e-03
    gl0 = gl0 * x2 - 1.917526917526918e-03
    gl0 = gl0 * x2 + 8.417508417508418e-04
    gl0 = gl0 * x2 - 5.952380952380952e-04
    gl0 = gl0 * x2 + 7.936507936507937e-04
    gl0 = gl0 * x2 - 2.777777777777778e-03
    gl0 = gl0 * x2 + 8.333333333333333e-02
    gl = gl0 / x0 + 0.5 * 1.8378770664093453e00 + (x0 - 0.5) * tl.log(x0) - x0
    shift = tl.full(x.shape, 1.0, tl.float64)  # x (x + 1) ... (x0 - 1): at most 6! / 1, one log
    for i in tl.static_range(6):
        shift *= tl.where(i < n, x0 - 1.0 - i, 1.0)
    return tl.where(x <= 2.0, 0.0, gl - tl.log(shift))


@triton.jit
def inversion_counts(rate, small, key, pixel, zero, BLOCK: tl.constexpr):
    """Poisson counts by sequential search (inversion) on the ``small`` lanes (0 < rate < 10), one
    53-bit uniform each from the Philox counter ``(pixel, 0xFFFFFFFF)``; other lanes hold 0."""
    r0, r1, _r2, _r3 = tl.philox(key, pixel, tl.full([BLOCK], 0xFFFFFFFF, tl.uint32), zero, zero)
    u = uniform53(r0, r1)
    lam_small = tl.where(small, rate, 1.0)
    p = tl.exp(-lam_small)
    cumulative = p
    k_small = tl.zeros([BLOCK], dtype=tl.float64)
    searching = small & (u > cumulative)
    while tl.max(searching.to(tl.int32), axis=0) > 0:
        k_small = tl.where(searching, k_small + 1.0, k_small)
        p = tl.where(searching, p * lam_small / k_small, p)
        grown = cumulative + p
        stuck = grown <= cumulative  # float64 tail: u within rounding of 1
        cumulative = tl.where(searching, grown, cumulative)
        searching = searching & ~stuck & (u > cumulative)
    return k_small


@triton.jit
def poisson_counts(rate, key, pixel, zero, BLOCK: tl.constexpr):
    """Exact Poisson counts (float64) of the float64 means ``rate`` (0 on lanes to skip): PTRS on the
    Philox counters ``(pixel, round)`` for means >= 10, :func:`inversion_counts` below."""
    large = rate >= 10.0
    lam = tl.where(large, rate, 10.0)  # constants at a harmless 10 on the other lanes
    b = 0.931 + 2.53 * tl.sqrt(lam)
    a = -0.059 + 0.02483 * b
    log_inv_alpha = tl.log(1.1239 + 1.1328 / (b - 3.4))
    vr = 0.9277 - 3.6224 / (b - 2.0)
    loglam = tl.log(lam)
    counts = tl.zeros([BLOCK], dtype=tl.float64)
    pending = large
    round_ = zero
    while tl.max(pending.to(tl.int32), axis=0) > 0:
        r0, r1, r2, r3 = tl.philox(key, pixel, round_, zero, zero)
        u = uniform53(r0, r1) - 0.5
        v = uniform53(r2, r3)
        us = 0.5 - tl.abs(u)
        k = tl.floor((2.0 * a / us + b) * u + lam + 0.43)
        squeeze = (us >= 0.07) & (v <= vr)
        possible = (k >= 0.0) & ((us >= 0.013) | (v <= us))
        log_target = k * loglam - lam - loggam(tl.maximum(k, 0.0) + 1.0)
        exact = tl.log(v) + log_inv_alpha - tl.log(a / (us * us) + b) <= log_target
        accept = pending & (squeeze | (possible & exact))
        counts = tl.where(accept, k, counts)
        pending = pending & ~accept
        round_ = round_ + 1
    small = (rate > 0.0) & ~large
    return tl.where(small, inversion_counts(rate, small, key, pixel, zero, BLOCK), counts)


@triton.jit
def digitize(counts, dark, key, pixel, zero, full_well, read_noise, gain, black, max_dn, BLOCK: tl.constexpr):
    """``Sensor._digitize``: full well, read noise (Box-Muller on the Philox counter ``(pixel,
    0xFFFFFFFE)``), ADC rounding (half to even) and range; returns the dark-subtracted electrons
    (float32) and which lanes clipped."""
    electrons = counts.to(tl.float32)
    clipped = electrons > full_well
    electrons = tl.minimum(electrons, full_well)
    if read_noise > 0:
        q0, q1, q2, q3 = tl.philox(key, pixel, tl.full([BLOCK], 0xFFFFFFFE, tl.uint32), zero, zero)
        radius = tl.sqrt(-2.0 * tl.log(tl.maximum(uniform53(q0, q1), 1e-300)))
        normal = radius * tl.cos(6.283185307179586 * uniform53(q2, q3))
        electrons = electrons + read_noise * normal.to(tl.float32)
    scaled = electrons / gain
    rounded = tl.floor(scaled + 0.5)
    odd = (rounded - 2.0 * tl.floor(rounded * 0.5)) != 0.0
    rounded = tl.where((rounded - scaled == 0.5) & odd, rounded - 1.0, rounded)
    dn = rounded + black
    clipped = clipped | (dn < 0.0) | (dn > max_dn)
    dn = tl.minimum(tl.maximum(dn, 0.0), max_dn)
    return (dn - black) * gain - dark.to(tl.float32), clipped


@triton.jit
def camera_read_kernel(
    signal_ptr,
    dark_ptr,
    out_ptr,
    clipped_ptr,
    key_ptr,
    n,
    columns,
    flat_signal,
    dark_scalar,
    full_well,
    read_noise,
    gain,
    black,
    max_dn,
    HAS_SIGNAL: tl.constexpr,
    HAS_DARK_MAP: tl.constexpr,
    BLOCK: tl.constexpr,
):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    if HAS_DARK_MAP:
        dark = tl.load(dark_ptr + offsets % columns, mask=mask, other=0.0).to(tl.float64)
    else:
        dark = tl.zeros([BLOCK], dtype=tl.float64) + dark_scalar
    if HAS_SIGNAL:
        rate = tl.load(signal_ptr + offsets, mask=mask, other=0.0).to(tl.float64) + dark
    else:
        rate = tl.zeros([BLOCK], dtype=tl.float64) + flat_signal + dark
    rate = tl.where(mask, rate, 0.0)
    key = tl.load(key_ptr)
    pixel = offsets.to(tl.uint32)
    zero = tl.zeros([BLOCK], dtype=tl.uint32)
    counts = poisson_counts(rate, key, pixel, zero, BLOCK)
    result, clipped = digitize(counts, dark, key, pixel, zero, full_well, read_noise, gain, black, max_dn, BLOCK)
    tl.store(out_ptr + offsets, result, mask=mask)
    tl.atomic_add(clipped_ptr, tl.sum((clipped & mask).to(tl.int32), axis=0))


def camera_read(
    signal_e: torch.Tensor | float,
    shape: tuple[int, ...],
    dark_e: torch.Tensor | float,
    generator: torch.Generator,
    device: torch.device,
    *,
    full_well_e: float,
    read_noise_e: float,
    gain_e_per_dn: float,
    black_level_dn: float,
    max_dn: float,
    block: int = BLOCK,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Dark-subtracted electrons of one frame (float32, ``shape``) and its clipped-pixel count (a
    0-d int32 tensor, not synchronized). ``signal_e``: the mean photo-electrons per pixel (a tensor
    of ``shape``, or one float for a flat field); ``dark_e``: mean dark electrons (a float, or one
    per pixel of the last dimension)."""
    numel = math.prod(shape)
    columns = shape[-1] if shape else 1
    signal = signal_e.detach().reshape(-1).contiguous() if isinstance(signal_e, torch.Tensor) else None
    dark = dark_e.detach().reshape(-1).contiguous().float() if isinstance(dark_e, torch.Tensor) else None
    has_signal, has_dark_map = signal is not None, dark is not None
    if signal is not None and signal.numel() != numel:
        raise ValueError(f"signal has {signal.numel()} pixels, the frame {numel}")
    if dark is not None and dark.numel() != columns:
        raise ValueError(f"dark map has {dark.numel()} pixels, the frame's rows {columns}")
    key = torch.randint(0, 2**62, (1,), generator=generator, device=device, dtype=torch.int64)
    out = torch.empty(numel, dtype=torch.float32, device=device)
    clipped = torch.zeros((), dtype=torch.int32, device=device)
    placeholder = out  # unused pointer arguments (constexpr flags switch their loads off)
    camera_read_kernel[(triton.cdiv(numel, block),)](
        signal if has_signal else placeholder,
        dark if has_dark_map else placeholder,
        out,
        clipped,
        key,
        numel,
        columns,
        0.0 if isinstance(signal_e, torch.Tensor) else float(signal_e),
        0.0 if isinstance(dark_e, torch.Tensor) else float(dark_e),
        float(full_well_e),
        float(read_noise_e),
        float(gain_e_per_dn),
        float(black_level_dn),
        float(max_dn),
        HAS_SIGNAL=has_signal,
        HAS_DARK_MAP=has_dark_map,
        BLOCK=block,
    )
    return out.view(shape), clipped
