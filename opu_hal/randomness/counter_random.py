"""Counter-based Gaussian numbers: entry ``i`` of a stream is a pure function of ``(seed, i)``.

Each pair of entries comes from one 64-bit hash of ``seed`` and the pair's index (the SplitMix64
finaliser, Steele, Lea and Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014),
split into two 32-bit uniforms and turned into two normals by Box-Muller. Only int64 wrap-around
arithmetic, shifts, masks and float64 functions are used, so any device computes the same numbers
(float64 ``log``/``cos`` agree to a few ulps across devices, below float32's resolution), for any
slice of the stream, in any order: the simulated OPU's transmission matrix can be generated tile by
tile on the CPU or on a GPU and be the same matrix. Not for privacy noise (it is seeded).
"""

from __future__ import annotations

import math

import torch

_GOLDEN = -0x61C8864680B583EB  # 0x9E3779B97F4A7C15 as a signed int64
_MIX1 = -0x40A7B892E31B1A47  # 0xBF58476D1CE4E5B9
_MIX2 = -0x6B2FB644ECCEEE15  # 0x94D049BB133111EB
_LOW32 = 0xFFFFFFFF


def _shift_right(z: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of int64 (torch's ``>>`` is arithmetic)."""
    return (z >> bits) & ((1 << (64 - bits)) - 1)


def splitmix64(counters: torch.Tensor, seed: int) -> torch.Tensor:
    """The SplitMix64 output for each int64 counter under ``seed`` (wrap-around int64)."""
    z = counters * _GOLDEN + (seed & (2**63 - 1))
    z = (z ^ _shift_right(z, 30)) * _MIX1
    z = (z ^ _shift_right(z, 27)) * _MIX2
    return z ^ _shift_right(z, 31)


def gaussian(
    seed: int, start: int, count: int, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Entries ``start .. start + count - 1`` of the standard normal stream of ``seed``."""
    if start < 0 or count < 0:
        raise ValueError(f"stream slice start {start}, count {count}: both must be >= 0")
    first_pair, last_pair = start // 2, (start + count + 1) // 2
    pairs = torch.arange(first_pair, last_pair, dtype=torch.int64, device=device)
    bits = splitmix64(pairs, seed)
    u1 = ((_shift_right(bits, 32) & _LOW32).double() + 1.0) / 2.0**32  # (0, 1]
    u2 = (bits & _LOW32).double() / 2.0**32  # [0, 1)
    radius = torch.sqrt(-2.0 * torch.log(u1))
    angle = 2.0 * math.pi * u2
    normals = torch.stack((radius * torch.cos(angle), radius * torch.sin(angle)), dim=1).reshape(-1)
    offset = start - 2 * first_pair
    return normals[offset : offset + count].to(dtype)
