"""Optics of the simulated OPU: a fixed complex Gaussian transmission matrix, generated in blocks.

The scattering medium maps a binary DMD pattern ``x`` to the camera field ``z = x T`` with
``T_jk ~ CN(0, 1)`` i.i.d. (paper 000, eq. 5: a complex Gaussian random matrix). Entry
``(j, k)``'s real and imaginary parts are elements ``2 (k n_in + j)`` and ``2 (k n_in + j) + 1`` of
a counter-based normal stream (:mod:`opu_hal.randomness.counter_random`) seeded by the profile, times
``sqrt(1/2)``: any block of output columns is a contiguous slice of that stream, generated on the
compute device (CPU or CUDA) and the same on both, and the whole matrix never has to be in memory.
Blocks of about ``block_bytes`` feed the matmul. The matrix is cached whole when it fits in
``cache_bytes`` and not at all otherwise: a projection scans the blocks in order, and a partial
least-recently-used cache would evict every block before its next use (it doubled the work and
the peak memory at in 10 000 -> out 100 000). Neither setting changes the matrix.
"""

from __future__ import annotations

import time

import torch

from ...randomness.counter_random import gaussian

_BYTES_PER_ENTRY = 2 * 4  # Re and Im, float32
_CHUNK_ENTRIES = 1 << 21  # stream entries generated at once (bounds the float64 temporaries)


class TransmissionMatrix:
    """``T`` of shape ``(in_features, out_features)``; entries have ``E|T_jk|^2 = 1``."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        seed: int,
        block_bytes: int,
        cache_bytes: int,
        device: torch.device | str = "cpu",
    ) -> None:
        self.in_features = in_features
        self.out_features = out_features
        self.device = torch.device(device)
        self._seed = seed
        self.block_out = max(1, min(out_features, block_bytes // (in_features * _BYTES_PER_ENTRY)))
        self.cache_whole = in_features * out_features * _BYTES_PER_ENTRY <= cache_bytes
        self._cache: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.blocks_generated = 0

    @property
    def n_blocks(self) -> int:
        return -(-self.out_features // self.block_out)

    @property
    def cached_bytes(self) -> int:
        return sum(part.numel() * part.element_size() for block in self._cache.values() for part in block)

    def generation_seconds(self) -> float:
        """Estimated seconds to generate the whole matrix once (what the first projection costs),
        from timing one chunk of the normal stream here (after a warm-up call)."""
        count = min(_CHUNK_ENTRIES, 2 * self.in_features * self.out_features)
        gaussian(self._seed, 0, count, device=self.device)  # warm-up: compiled kernels, caches
        started = time.perf_counter()
        gaussian(self._seed, 0, count, device=self.device)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        per_entry = (time.perf_counter() - started) / count
        return per_entry * 2 * self.in_features * self.out_features

    def block_range(self, index: int) -> tuple[int, int]:
        start = index * self.block_out
        return start, min(self.out_features, start + self.block_out)

    def _generate(self, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor]:
        n_in = self.in_features
        entries = torch.empty(2 * n_in * (stop - start), device=self.device)
        first = 2 * n_in * start
        for offset in range(0, entries.numel(), _CHUNK_ENTRIES):
            count = min(_CHUNK_ENTRIES, entries.numel() - offset)
            entries[offset : offset + count] = gaussian(self._seed, first + offset, count, device=self.device)
        parts = entries.mul_(0.5**0.5).view(stop - start, n_in, 2)
        self.blocks_generated += 1
        return parts[:, :, 0].T.contiguous(), parts[:, :, 1].T.contiguous()

    def block(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(Re T, Im T)`` for the output columns of block ``index``; each ``(in, width)``."""
        if index in self._cache:
            return self._cache[index]
        block = self._generate(*self.block_range(index))
        if self.cache_whole:
            self._cache[index] = block
        return block

    def field(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(Re z, Im z)`` of ``z = x T`` for a batch ``(n, in)``: each ``(n, out)``."""
        x = x.to(self.device)
        if self.n_blocks == 1:
            real, imag = self.block(0)
            return x @ real, x @ imag
        n = x.shape[0]
        out_real = torch.empty(n, self.out_features, device=self.device)
        out_imag = torch.empty(n, self.out_features, device=self.device)
        for index in range(self.n_blocks):
            start, stop = self.block_range(index)
            real, imag = self.block(index)
            out_real[:, start:stop] = x @ real
            out_imag[:, start:stop] = x @ imag
        return out_real, out_imag
