"""Optics of the simulated OPU: a fixed complex Gaussian transmission matrix, generated in tiles.

The scattering medium maps a binary DMD pattern ``x`` to the camera field ``z = x T`` with
``T_jk ~ CN(0, 1)`` i.i.d. (paper 000, eq. 5: a complex Gaussian random matrix). The output pixels
are cut into tiles whose width depends only on ``in_features``; each tile is drawn from its own
seed, so any part of ``T`` can be regenerated on demand and the whole matrix never has to fit in
memory. Tiles are grouped into blocks of about ``block_bytes`` for the matmul, and blocks are
cached under ``cache_bytes``; neither setting changes the matrix.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import torch

TILE_BYTES = 8 << 20  # one tile of [Re | Im] float32 columns
_BYTES_PER_ENTRY = 2 * 4


def tile_width(in_features: int) -> int:
    """Output columns per tile: a function of ``in_features`` only, so the matrix is fixed."""
    return max(1, TILE_BYTES // (in_features * _BYTES_PER_ENTRY))


class TransmissionMatrix:
    """``T`` of shape ``(in_features, out_features)``; entries have ``E|T_jk|^2 = 1``."""

    def __init__(
        self, in_features: int, out_features: int, seed: int, block_bytes: int, cache_bytes: int
    ) -> None:
        self.in_features = in_features
        self.out_features = out_features
        self._seed = seed
        self.tile_out = min(out_features, tile_width(in_features))
        tiles_per_block = max(1, block_bytes // (self.tile_out * in_features * _BYTES_PER_ENTRY))
        self.block_out = min(out_features, tiles_per_block * self.tile_out)
        self._cache_bytes = cache_bytes
        self._cache: OrderedDict[int, tuple[torch.Tensor, torch.Tensor]] = OrderedDict()
        self._cached_bytes = 0

    @property
    def n_blocks(self) -> int:
        return -(-self.out_features // self.block_out)

    @property
    def cached_bytes(self) -> int:
        return self._cached_bytes

    def block_range(self, index: int) -> tuple[int, int]:
        start = index * self.block_out
        return start, min(self.out_features, start + self.block_out)

    def _tile(self, tile: int, width: int) -> torch.Tensor:
        seed = int(np.random.SeedSequence([self._seed, tile]).generate_state(1)[0])
        generator = torch.Generator().manual_seed(seed)
        return torch.randn(self.in_features, 2, width, generator=generator).mul_(0.5**0.5)

    def block(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(Re T, Im T)`` for the output columns of block ``index``; each ``(in, width)``."""
        if index in self._cache:
            self._cache.move_to_end(index)
            return self._cache[index]
        start, stop = self.block_range(index)
        tiles = []
        for tile_start in range(start, stop, self.tile_out):
            tile = tile_start // self.tile_out
            tiles.append(self._tile(tile, min(self.tile_out, self.out_features - tile_start)))
        parts = torch.cat(tiles, dim=2) if len(tiles) > 1 else tiles[0]
        block = (parts[:, 0].contiguous(), parts[:, 1].contiguous())
        self._remember(index, block)
        return block

    def field(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(Re z, Im z)`` of ``z = x T`` for a batch ``(n, in)``: each ``(n, out)``."""
        if self.n_blocks == 1:
            real, imag = self.block(0)
            return x @ real, x @ imag
        n = x.shape[0]
        out_real = torch.empty(n, self.out_features)
        out_imag = torch.empty(n, self.out_features)
        for index in range(self.n_blocks):
            start, stop = self.block_range(index)
            real, imag = self.block(index)
            out_real[:, start:stop] = x @ real
            out_imag[:, start:stop] = x @ imag
        return out_real, out_imag

    def _remember(self, index: int, block: tuple[torch.Tensor, torch.Tensor]) -> None:
        size = sum(part.numel() * part.element_size() for part in block)
        if size > self._cache_bytes:
            return
        while self._cache and self._cached_bytes + size > self._cache_bytes:
            _, evicted = self._cache.popitem(last=False)
            self._cached_bytes -= sum(part.numel() * part.element_size() for part in evicted)
        self._cache[index] = block
        self._cached_bytes += size
