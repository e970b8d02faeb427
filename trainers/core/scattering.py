"""ScatterNet features: a fixed 2-D wavelet scattering transform of each image (Mallat 2012;
Bruna and Mallat 2013), the handcrafted front end of Tramer and Boneh (2021, "Differentially
private learning needs better features"), computed in torch.

With Morlet wavelets ``psi_{j,theta}`` (scales ``2^j``, ``j < J``, ``L`` orientations) and a
Gaussian low-pass ``phi_J``, the coefficients of an image ``x`` up to order 2 are

    S0 x = x * phi_J,   S1 x = |x * psi_{j1,t1}| * phi_J,   S2 x = ||x * psi_{j1,t1}| * psi_{j2,t2}| * phi_J  (j2 > j1)

each subsampled by ``2^J``. For 28 x 28 images, ``J = 2``, ``L = 8``: ``1 + J L + L^2 J (J - 1) / 2
= 81`` channels of 7 x 7, 3969 features. The filters and padding are kymatio's (``filter_bank``,
``compute_padding``), whose features Tramer and Boneh trained on: Morlet ``sigma = 0.8 * 2^j``,
``xi = 3 pi / 4 / 2^j``, slant ``4 / L``; low-pass ``sigma = 0.8 * 2^(J-1)``; images padded by
``2^J`` on each side by reflection. ``tests/test_scattering.py`` holds the coefficients to
kymatio 0.3.0's (``scripts/analysis/kymatio_reference.py``): within 0.5 % per image. An earlier
version smoothed with ``sigma = 0.8 * 2^J`` and padded by ``2^(J-1)``: 21 % away from kymatio, and
0.4 points less accurate under DP-SGD at epsilon 3 (docs/reproductions.md).

The transform and the per-image normalisation below use no data: they cost no privacy, like a
fixed public network. Each image's coefficients are normalised per group of channels (a group norm
without learned parameters, Tramer and Boneh's data-independent choice), so no statistic of the
private training set enters the features.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from .data import Dataset, DatasetError, Split

J = 2
ORIENTATIONS = 8
GROUPS = 27  # channels per group: 81 / 27 = 3


def _gabor(size: int, sigma: float, theta: float, xi: float, slant: float) -> torch.Tensor:
    """A periodised 2-D Gabor filter on a ``size x size`` grid (kymatio's ``gabor_2d``)."""
    rotation = torch.tensor(
        [[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]], dtype=torch.float64
    )
    inverse = torch.tensor(
        [[math.cos(theta), math.sin(theta)], [-math.sin(theta), math.cos(theta)]], dtype=torch.float64
    )
    curvature = rotation @ torch.diag(torch.tensor([1.0, slant**2], dtype=torch.float64)) @ inverse / (2 * sigma**2)
    kernel = torch.zeros(size, size, dtype=torch.complex128)
    grid = torch.arange(size, dtype=torch.float64)
    for ex in (-2, -1, 0, 1, 2):
        for ey in (-2, -1, 0, 1, 2):
            xx = (grid + ex * size)[:, None].expand(size, size)
            yy = (grid + ey * size)[None, :].expand(size, size)
            arg = -(
                curvature[0, 0] * xx * xx + (curvature[0, 1] + curvature[1, 0]) * xx * yy + curvature[1, 1] * yy * yy
            ) + 1j * (xx * xi * math.cos(theta) + yy * xi * math.sin(theta))
            kernel += torch.exp(arg)
    return kernel / (2 * math.pi * sigma**2 / slant)


def _morlet(size: int, sigma: float, theta: float, xi: float, slant: float) -> torch.Tensor:
    """A Gabor filter minus its envelope times a constant: a wavelet of zero mean."""
    wave = _gabor(size, sigma, theta, xi, slant)
    envelope = _gabor(size, sigma, theta, 0.0, slant)
    return wave - (wave.sum() / envelope.sum()) * envelope


class Scattering2D:
    """Order-2 scattering of ``(n, side, side)`` images, padded by ``2^J`` on each side by reflection."""

    def __init__(self, side: int, j: int = J, orientations: int = ORIENTATIONS) -> None:
        if side % 2**j or side <= 2**j:
            raise DatasetError(
                f"scattering needs an image side divisible by 2^J = {2**j} and larger "
                f"than it (the reflection padding), got {side}"
            )
        self.side, self.j, self.orientations = side, j, orientations
        self.pad = 2**j  # kymatio's compute_padding: 28 -> 36
        size = side + 2 * self.pad
        self.size = size
        self.wavelets = {
            (scale, angle): torch.fft.fft2(
                _morlet(
                    size,
                    0.8 * 2**scale,
                    (int(orientations - orientations / 2 - 1) - angle) * math.pi / orientations,
                    3.0 / 4.0 * math.pi / 2**scale,
                    4.0 / orientations,
                )
            ).real
            for scale in range(j)
            for angle in range(orientations)
        }
        self._psi = torch.stack([self.wavelets[key] for key in sorted(self.wavelets)]).to(torch.complex64)
        self._smoothers: dict[int, torch.Tensor] = {}

    @property
    def channels(self) -> int:
        j, n = self.j, self.orientations
        return 1 + j * n + n * n * j * (j - 1) // 2

    @property
    def n_features(self) -> int:
        return self.channels * (self.side // 2**self.j) ** 2

    def _smoothing_matrix(self, level: int) -> torch.Tensor:
        """``P`` with ``P^T U P = (U * phi_J)`` sampled every ``2^J`` pixels and unpadded, for ``U``
        on the grid subsampled by ``2^level``: ``phi_J`` is an isotropic Gaussian, so separable."""
        if level not in self._smoothers:
            step = 2**level
            m = self.size // step
            sigma = 0.8 * 2 ** (self.j - 1) / step
            grid = torch.arange(m, dtype=torch.float64)
            centres = torch.tensor(
                [(self.pad + 2**self.j * i) / step for i in range(self.side // 2**self.j)], dtype=torch.float64
            )
            offset = (centres[None, :] - grid[:, None]) % m
            kernel = sum(torch.exp(-((offset + wrap * m) ** 2) / (2 * sigma**2)) for wrap in (-2, -1, 0, 1))
            self._smoothers[level] = (kernel / (math.sqrt(2 * math.pi) * sigma)).float()
        return self._smoothers[level]

    def _smooth(self, modulus: torch.Tensor, level: int = 0) -> torch.Tensor:
        p = self._smoothing_matrix(level)
        return p.T @ modulus @ p

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        """``(n, channels, side / 2^J, side / 2^J)`` scattering coefficients, float32."""
        n = images.shape[0]
        x = torch.nn.functional.pad(images.float().unsqueeze(1), (self.pad,) * 4, mode="reflect")
        first = torch.fft.ifft2(torch.fft.fft2(x) * self._psi).abs()  # (n, J L, size, size)
        out = [self._smooth(x), self._smooth(first)]
        per_scale = self.orientations
        for scale1 in range(self.j - 1):
            spectrum = torch.fft.fft2(first[:, scale1 * per_scale : (scale1 + 1) * per_scale]).unsqueeze(2)
            for scale2 in range(scale1 + 1, self.j):
                psi = self._psi[scale2 * per_scale : (scale2 + 1) * per_scale]
                # |U1 * psi_j2| is band-limited at scale 2^j2: computed on the grid subsampled by
                # 2^(j2 - j1) (kymatio does the same), periodising the spectrum.
                second = torch.fft.ifft2(_periodized_product(spectrum, psi, 2 ** (scale2 - scale1))).abs()
                out.append(self._smooth(second, level=scale2 - scale1).reshape(n, -1, *out[0].shape[-2:]))
        return torch.cat(out, dim=1)


def _periodized_product(spectrum: torch.Tensor, psi: torch.Tensor, fold: int) -> torch.Tensor:
    """The spectrum of ``ifft(spectrum * psi)`` subsampled by ``fold`` in space: the mean of the
    product's ``fold x fold`` periods (summed block by block, never materialised whole)."""
    m = spectrum.shape[-1] // fold
    total = None
    for a in range(fold):
        for b in range(fold):
            rows, cols = slice(a * m, (a + 1) * m), slice(b * m, (b + 1) * m)
            part = spectrum[..., rows, cols] * psi[..., rows, cols]
            total = part if total is None else total.add_(part)
    if total is None:
        raise ValueError(f"fold must be >= 1, got {fold}")
    return total / fold**2


def group_normalize(coefficients: torch.Tensor, groups: int = GROUPS, eps: float = 1e-6) -> torch.Tensor:
    """Per image, standardise each group of channels (no learned parameters, no data statistics).
    ``eps`` is relative to the image's mean square coefficient: second-order coefficients are
    orders of magnitude below the first, and an absolute floor would flatten them."""
    n, channels = coefficients.shape[:2]
    if channels % groups:
        raise DatasetError(f"{channels} scattering channels do not split into {groups} groups")
    grouped = coefficients.reshape(n, groups, -1)
    mean = grouped.mean(dim=2, keepdim=True)
    var = grouped.var(dim=2, unbiased=False, keepdim=True)
    floor = eps * grouped.square().mean(dim=(1, 2), keepdim=True) + 1e-30
    return ((grouped - mean) / torch.sqrt(var + floor)).reshape(n, -1)


def scatter_split(
    split: Split, transform: Scattering2D, chunk: int = 500, progress: Callable[[int], object] | None = None
) -> Split:
    """Flattened, group-normalised scattering features of a split of flattened square images."""
    side = transform.side
    if split.x.shape[1] != side * side:
        raise DatasetError(
            f"scattering expects {side}x{side} images ({side * side} features), got {split.x.shape[1]} features"
        )
    parts = []
    with torch.no_grad():
        for start in range(0, len(split), chunk):
            images = split.x[start : start + chunk].reshape(-1, side, side)
            parts.append(group_normalize(transform(images)))
            if progress is not None:
                progress(min(chunk, len(split) - start))
    features = torch.cat(parts) if parts else torch.empty(0, transform.n_features)
    return Split(features, split.y)


def scatter_dataset(data: Dataset, progress: Callable[[int], object] | None = None) -> Dataset:
    """The dataset with every split replaced by its ScatterNet features (no privacy cost)."""
    side = math.isqrt(data.n_features)
    if side * side != data.n_features:
        raise DatasetError(
            f"--features scatter needs square images; dataset {data.name!r} has {data.n_features} features"
        )
    transform = Scattering2D(side)
    return data.with_splits(
        scatter_split(data.train, transform, progress=progress),
        scatter_split(data.validation, transform, progress=progress),
        scatter_split(data.test, transform, progress=progress),
    )
