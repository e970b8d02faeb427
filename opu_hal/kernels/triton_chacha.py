"""Privacy noise drawn on the GPU: the ChaCha20 block function in one Triton kernel.

:class:`opu_hal.randomness.secure_random.SecureGenerator` draws on the CPU (randomgen's ChaCha20), and a
private step on a GPU then waits for the CPU and a host-to-device copy of every noise value. This
kernel runs the same cipher on the device: each lane computes one 64-byte ChaCha20 block
(Bernstein 2008; 20 rounds, the quarter round of RFC 8439 section 2.1) of the state

    constants | 256-bit key | 64-bit block counter | 64-bit nonce

(the original 64/64 split, so one key covers 2^64 blocks), and turns its sixteen 32-bit words into
eight float64 uniforms of 53 bits (numpy's construction) and four Box-Muller pairs: eight N(0, 1)
values, returned in float32. The key comes from :func:`os.urandom` and lives only in the generator
(and in checkpoints, which are secret); nothing public determines it.

This module imports Triton: import it only where :func:`opu_hal.runtime.compute.triton_ready` says so.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 256
NORMALS_PER_BLOCK = 8  # sixteen words -> eight 53-bit uniforms -> four Box-Muller pairs


@triton.jit
def _rotl(x, n: tl.constexpr):
    return (x << n) | (x >> (32 - n))


@triton.jit
def _quarter(a, b, c, d):
    """RFC 8439 section 2.1, on uint32 lanes (additions wrap modulo 2^32)."""
    a = a + b
    d = _rotl(d ^ a, 16)
    c = c + d
    b = _rotl(b ^ c, 12)
    a = a + b
    d = _rotl(d ^ a, 8)
    c = c + d
    b = _rotl(b ^ c, 7)
    return a, b, c, d


@triton.jit
def _uniform53(hi, lo):
    return ((hi >> 5).to(tl.float64) * 67108864.0 + (lo >> 6).to(tl.float64)) * (1.0 / 9007199254740992.0)


@triton.jit
def _box_muller(u1, u2):
    radius = tl.sqrt(-2.0 * tl.log(1.0 - u1))  # 1 - u1 in (0, 1]
    angle = 6.283185307179586 * u2
    return radius * tl.cos(angle), radius * tl.sin(angle)


@triton.jit
def _chacha_kernel(
    key_ptr, out_ptr, n_out, n_blocks, counter_start, nonce_lo, nonce_hi, RAW: tl.constexpr, BLOCK: tl.constexpr
):
    lane = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = lane < n_blocks
    counter = lane.to(tl.int64) + counter_start
    zero = tl.zeros([BLOCK], dtype=tl.uint32)
    s0 = zero + 0x61707865  # "expand 32-byte k"
    s1 = zero + 0x3320646E
    s2 = zero + 0x79622D32
    s3 = zero + 0x6B206574
    s4 = zero + tl.load(key_ptr + 0).to(tl.uint32)
    s5 = zero + tl.load(key_ptr + 1).to(tl.uint32)
    s6 = zero + tl.load(key_ptr + 2).to(tl.uint32)
    s7 = zero + tl.load(key_ptr + 3).to(tl.uint32)
    s8 = zero + tl.load(key_ptr + 4).to(tl.uint32)
    s9 = zero + tl.load(key_ptr + 5).to(tl.uint32)
    s10 = zero + tl.load(key_ptr + 6).to(tl.uint32)
    s11 = zero + tl.load(key_ptr + 7).to(tl.uint32)
    s12 = (counter & 0xFFFFFFFF).to(tl.uint32)
    s13 = (counter >> 32).to(tl.uint32)
    s14 = (zero.to(tl.int64) + nonce_lo).to(tl.uint32)
    s15 = (zero.to(tl.int64) + nonce_hi).to(tl.uint32)
    x0, x1, x2, x3, x4, x5, x6, x7 = s0, s1, s2, s3, s4, s5, s6, s7
    x8, x9, x10, x11, x12, x13, x14, x15 = s8, s9, s10, s11, s12, s13, s14, s15
    for _ in tl.static_range(10):  # 10 double rounds = 20 rounds
        x0, x4, x8, x12 = _quarter(x0, x4, x8, x12)
        x1, x5, x9, x13 = _quarter(x1, x5, x9, x13)
        x2, x6, x10, x14 = _quarter(x2, x6, x10, x14)
        x3, x7, x11, x15 = _quarter(x3, x7, x11, x15)
        x0, x5, x10, x15 = _quarter(x0, x5, x10, x15)
        x1, x6, x11, x12 = _quarter(x1, x6, x11, x12)
        x2, x7, x8, x13 = _quarter(x2, x7, x8, x13)
        x3, x4, x9, x14 = _quarter(x3, x4, x9, x14)
    x0 += s0
    x1 += s1
    x2 += s2
    x3 += s3
    x4 += s4
    x5 += s5
    x6 += s6
    x7 += s7
    x8 += s8
    x9 += s9
    x10 += s10
    x11 += s11
    x12 += s12
    x13 += s13
    x14 += s14
    x15 += s15
    if RAW:  # the sixteen keystream words (tests against RFC 8439)
        base = lane.to(tl.int64) * 16
        tl.store(out_ptr + base + 0, x0.to(tl.int64), mask=live)
        tl.store(out_ptr + base + 1, x1.to(tl.int64), mask=live)
        tl.store(out_ptr + base + 2, x2.to(tl.int64), mask=live)
        tl.store(out_ptr + base + 3, x3.to(tl.int64), mask=live)
        tl.store(out_ptr + base + 4, x4.to(tl.int64), mask=live)
        tl.store(out_ptr + base + 5, x5.to(tl.int64), mask=live)
        tl.store(out_ptr + base + 6, x6.to(tl.int64), mask=live)
        tl.store(out_ptr + base + 7, x7.to(tl.int64), mask=live)
        tl.store(out_ptr + base + 8, x8.to(tl.int64), mask=live)
        tl.store(out_ptr + base + 9, x9.to(tl.int64), mask=live)
        tl.store(out_ptr + base + 10, x10.to(tl.int64), mask=live)
        tl.store(out_ptr + base + 11, x11.to(tl.int64), mask=live)
        tl.store(out_ptr + base + 12, x12.to(tl.int64), mask=live)
        tl.store(out_ptr + base + 13, x13.to(tl.int64), mask=live)
        tl.store(out_ptr + base + 14, x14.to(tl.int64), mask=live)
        tl.store(out_ptr + base + 15, x15.to(tl.int64), mask=live)
    else:
        base = lane.to(tl.int64) * 8
        z0, z1 = _box_muller(_uniform53(x0, x1), _uniform53(x2, x3))
        z2, z3 = _box_muller(_uniform53(x4, x5), _uniform53(x6, x7))
        z4, z5 = _box_muller(_uniform53(x8, x9), _uniform53(x10, x11))
        z6, z7 = _box_muller(_uniform53(x12, x13), _uniform53(x14, x15))
        tl.store(out_ptr + base + 0, z0.to(tl.float32), mask=live & (base + 0 < n_out))
        tl.store(out_ptr + base + 1, z1.to(tl.float32), mask=live & (base + 1 < n_out))
        tl.store(out_ptr + base + 2, z2.to(tl.float32), mask=live & (base + 2 < n_out))
        tl.store(out_ptr + base + 3, z3.to(tl.float32), mask=live & (base + 3 < n_out))
        tl.store(out_ptr + base + 4, z4.to(tl.float32), mask=live & (base + 4 < n_out))
        tl.store(out_ptr + base + 5, z5.to(tl.float32), mask=live & (base + 5 < n_out))
        tl.store(out_ptr + base + 6, z6.to(tl.float32), mask=live & (base + 6 < n_out))
        tl.store(out_ptr + base + 7, z7.to(tl.float32), mask=live & (base + 7 < n_out))


def _launch(
    key_words: torch.Tensor, out: torch.Tensor, n_out: int, n_blocks: int, counter: int, nonce: int, raw: bool
) -> None:
    grid = (triton.cdiv(n_blocks, BLOCK),)
    _chacha_kernel[grid](
        key_words, out, n_out, n_blocks, counter, nonce & 0xFFFFFFFF, nonce >> 32, RAW=raw, BLOCK=BLOCK
    )


def keystream_words(key: bytes, counter: int, nonce: int, n_blocks: int, device: torch.device) -> torch.Tensor:
    """The raw ChaCha20 words of ``n_blocks`` blocks from ``counter`` (int64 tensor ``(n, 16)``)."""
    out = torch.empty(n_blocks * 16, dtype=torch.int64, device=device)
    _launch(key_tensor(key, device), out, out.numel(), n_blocks, counter, nonce, raw=True)
    return out.view(n_blocks, 16)


def key_tensor(key: bytes, device: torch.device) -> torch.Tensor:
    """A 32-byte key as eight little-endian words (int64, for the kernel's loads)."""
    if len(key) != 32:
        raise ValueError(f"a ChaCha20 key has 32 bytes, got {len(key)}")
    words = [int.from_bytes(key[4 * i : 4 * i + 4], "little") for i in range(8)]
    return torch.tensor(words, dtype=torch.int64, device=device)


def standard_normal(key_words: torch.Tensor, counter: int, nonce: int, n: int) -> torch.Tensor:
    """``n`` N(0, 1) values (float32, on the key's device) from the blocks ``counter, counter + 1,
    ...``; the caller advances its counter by :func:`blocks_for` ``(n)``."""
    out = torch.empty(n, dtype=torch.float32, device=key_words.device)
    if n:
        _launch(key_words, out, n, blocks_for(n), counter, nonce, raw=False)
    return out


def blocks_for(n: int) -> int:
    """ChaCha20 blocks that ``n`` normals consume."""
    return -(-n // NORMALS_PER_BLOCK)
