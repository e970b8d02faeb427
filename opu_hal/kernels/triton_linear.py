"""The three frames of a linear-mode projection in one GPU kernel (Triton).

:meth:`opu_hal.backends.simulated.camera.Sensor.read_linear` reads ``e_2 = frame(|z|^2)``,
``e_1 = frame(|z + a|^2)`` and ``e_3 = frame(|a|^2)`` and returns ``e_1 - e_2 - e_3`` (the module
docstring of :mod:`opu_hal.backends.simulated.device`). Three separate fused reads
(:mod:`.triton_camera`) cost three launches, some fifteen element-wise kernels between them (the
two intensities, the difference, the means) and four host synchronizations. Here one launch computes
both intensities per pixel from the field, draws the three frames' exact counts and digitizations
with the same functions and the same Philox counters under the same three keys (drawn from the
camera's generator in the order of the three reads), and writes the difference, the clipped reads
and the per-block sums of the two intensities; one synchronization reads the clipped count and the
mean. The counts are those of the three separate reads, the intensities as torch computes them up
to the compiler's fused multiply-adds (the last float32 bit of a mean).

Training-quality noise of the simulated physics, never privacy noise. Import only where
:func:`opu_hal.gpu.triton_ready` says so.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from .triton_camera import BLOCK, digitize, poisson_counts


@triton.jit
def _frame(rate, dark, key, pixel, zero, full_well, read_noise, gain, black, max_dn, BLOCK: tl.constexpr):
    """One frame's dark-subtracted electrons and clipped lanes from its per-pixel means ``rate``."""
    counts = poisson_counts(rate, key, pixel, zero, BLOCK)
    return digitize(counts, dark, key, pixel, zero, full_well, read_noise, gain, black, max_dn, BLOCK)


@triton.jit
def linear_frames_kernel(
    real_ptr,
    imag_ptr,
    cos_ptr,
    sin_ptr,
    dark_ptr,
    out_ptr,
    clipped_ptr,
    sums_ptr,
    signal_key_ptr,
    anchor_key_ptr,
    flat_key_ptr,
    n,
    columns,
    amplitude,
    anchor_e,
    dark_scalar,
    full_well,
    read_noise,
    gain,
    black,
    max_dn,
    HAS_DARK_MAP: tl.constexpr,
    BLOCK: tl.constexpr,
):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    column = offsets % columns
    re = tl.load(real_ptr + offsets, mask=mask, other=0.0)
    im = tl.load(imag_ptr + offsets, mask=mask, other=0.0)
    shifted_re = re + amplitude * tl.load(cos_ptr + column, mask=mask, other=0.0)
    shifted_im = im + amplitude * tl.load(sin_ptr + column, mask=mask, other=0.0)
    signal = re * re + im * im  # float32, as torch's real**2 + imag**2
    with_anchor = shifted_re * shifted_re + shifted_im * shifted_im
    if HAS_DARK_MAP:
        dark = tl.load(dark_ptr + column, mask=mask, other=0.0).to(tl.float64)
    else:
        dark = tl.zeros([BLOCK], dtype=tl.float64) + dark_scalar
    pixel = offsets.to(tl.uint32)
    zero = tl.zeros([BLOCK], dtype=tl.uint32)
    signal_rate = tl.where(mask, signal.to(tl.float64) + dark, 0.0)
    e2, hit2 = _frame(
        signal_rate, dark, tl.load(signal_key_ptr), pixel, zero, full_well, read_noise, gain, black, max_dn, BLOCK
    )
    anchor_rate = tl.where(mask, with_anchor.to(tl.float64) + dark, 0.0)
    e1, hit1 = _frame(
        anchor_rate, dark, tl.load(anchor_key_ptr), pixel, zero, full_well, read_noise, gain, black, max_dn, BLOCK
    )
    flat_rate = tl.where(mask, anchor_e + dark, 0.0)
    e3, hit3 = _frame(
        flat_rate, dark, tl.load(flat_key_ptr), pixel, zero, full_well, read_noise, gain, black, max_dn, BLOCK
    )
    tl.store(out_ptr + offsets, (e1 - e2) - e3, mask=mask)
    hits = ((hit1 & mask).to(tl.int32) + (hit2 & mask).to(tl.int32)) + (hit3 & mask).to(tl.int32)
    tl.atomic_add(clipped_ptr, tl.sum(hits, axis=0))
    both = tl.where(mask, signal.to(tl.float64) + with_anchor.to(tl.float64), 0.0)
    tl.store(sums_ptr + tl.program_id(0), tl.sum(both, axis=0))


def linear_frames(
    real: torch.Tensor,
    imag: torch.Tensor,
    anchor_cos: torch.Tensor,
    anchor_sin: torch.Tensor,
    anchor_e: float,
    dark_e: torch.Tensor | float,
    generator: torch.Generator,
    *,
    full_well_e: float,
    read_noise_e: float,
    gain_e_per_dn: float,
    black_level_dn: float,
    max_dn: float,
    block: int = BLOCK,
) -> tuple[torch.Tensor, int, float]:
    """``(e_1 - e_2 - e_3, clipped reads, mean of |z + a|^2 + |z|^2)`` for the camera field ``real``,
    ``imag`` (float32, ``(rows, pixels)``, in sqrt(electrons)) and the anchor of ``anchor_e``
    electrons with phases ``anchor_cos``, ``anchor_sin`` (one per pixel), as three reads of
    :func:`.triton_camera.camera_read` would give them; one host synchronization."""
    shape = tuple(real.shape)
    numel = math.prod(shape)
    columns = shape[-1] if shape else 1
    device = real.device
    fields = [t.detach().reshape(-1).float().contiguous() for t in (real, imag)]
    phases = [t.detach().reshape(-1).float().contiguous() for t in (anchor_cos, anchor_sin)]
    if any(p.numel() != columns for p in phases):
        raise ValueError(f"anchor phases have {phases[0].numel()} pixels, the frame's rows {columns}")
    dark = dark_e.detach().reshape(-1).contiguous().float() if isinstance(dark_e, torch.Tensor) else None
    if dark is not None and dark.numel() != columns:
        raise ValueError(f"dark map has {dark.numel()} pixels, the frame's rows {columns}")
    # one key per frame, in the order of Sensor.read_linear's three separate reads
    keys = [torch.randint(0, 2**62, (1,), generator=generator, device=device, dtype=torch.int64) for _ in range(3)]
    grid = triton.cdiv(numel, block)
    out = torch.empty(numel, dtype=torch.float32, device=device)
    clipped = torch.zeros((), dtype=torch.int32, device=device)
    sums = torch.empty(grid, dtype=torch.float64, device=device)
    linear_frames_kernel[(grid,)](
        *fields,
        *phases,
        dark if dark is not None else out,  # unused pointer when HAS_DARK_MAP is off
        out,
        clipped,
        sums,
        *keys,
        numel,
        columns,
        math.sqrt(anchor_e),
        float(anchor_e),
        0.0 if dark is not None else float(dark_e),
        float(full_well_e),
        float(read_noise_e),
        float(gain_e_per_dn),
        float(black_level_dn),
        float(max_dn),
        HAS_DARK_MAP=dark is not None,
        BLOCK=block,
    )
    clipped_count, total = torch.stack([clipped.to(torch.float64), sums.sum()]).tolist()  # one synchronization
    return out.view(shape), int(clipped_count), total / max(numel, 1)
