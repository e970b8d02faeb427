"""The linear mode's reference (anchor) field at the pixels a projection reads.

A LightOn OPU has no reference beam. Its linear mode interferes the input's field with the field of
an anchor pattern shown on mirrors outside the input's, which reaches the camera through the same
scattering medium (anchors for phasing optical random projections: Gupta, Ghosh, Dokmanic et al.,
arXiv 1907.01703). Through a complex Gaussian medium (paper 000, eq. 5: ``T_jk ~ CN(0, 1)``) the
anchor's field at pixel ``j`` is a sum of independent ``CN`` terms, so

    a_j = A u_j,   u_j = sum_{k in anchor} T'_jk / sqrt(m) ~ CN(0, 1),   |a_j|^2 = A^2 s_j,  s_j ~ Exp(1)

(fully developed speckle; ``T'`` the medium's entries at the ``m`` anchor mirrors, independent of
the input's, so ``u`` is independent of the projection matrix ``B``). ``"flat"`` is a reference beam
of uniform amplitude, ``u_j = e^{i theta_j}``: only for hardware that has one.

Pixel ``j``'s hologram ``e_1 - e_2 - e_3 = 2 A Re(conj(u_j) z_j) + noise`` is divided by its own
``2 A |u_j|`` (the anchor's calibrated amplitude), so ``B_jk = sqrt(2 / n) Re(e^{-i theta_j} T_jk)``
keeps i.i.d. ``N(0, 1 / n)`` entries and the noise of pixel ``j`` is (:mod:`.device`, with
``A^2`` replaced by the pixel's own ``A^2 s_j``)

    Var(g_j) = (|z_j + a_j|^2 + |z_j|^2 + A^2 s_j + 3 F) / (2 A^2 s_j Phi):

a pixel where the reference is dim is a noisy output. Its input-independent minimum,
``0.75 / Phi + 1.5 F_r / (A^2 s_j Phi)``, falls with ``s_j``, so every pixel's noise is at least
the brightest reference pixel's bound, and at least ``0.75 / Phi`` whatever the reference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Literal

import torch

from ...randomness.seeding import stream_seed
from .dither import profile_band
from .optics import TransmissionMatrix

if TYPE_CHECKING:
    from .profile import SimulatedProfile

ReferenceKind = Literal["speckle", "flat"]
ANCHOR_MIRRORS = 64  # mirrors of the reference's DMD pattern, outside the input's


@dataclass(frozen=True)
class ReferenceField:
    """``u_j`` at every pixel read: unit phasors ``cos``, ``sin`` and amplitude ``|u_j|`` (float32)."""

    kind: ReferenceKind
    cos: torch.Tensor
    sin: torch.Tensor
    amplitude: torch.Tensor

    @classmethod
    def build(
        cls,
        kind: ReferenceKind,
        seed: int,
        pixels: int,
        device: torch.device,
        band: tuple[float, float] | None = None,
    ) -> ReferenceField:
        """The profile's reference: speckle through the medium, or a flat beam of random phase. ``band``
        (speckle only): the ``pixels`` read are the first of the sensor whose ``s_j`` lies in it."""
        if kind == "flat":
            generator = torch.Generator().manual_seed(stream_seed(seed, "anchor"))
            theta = 2 * math.pi * torch.rand(pixels, generator=generator)
            amplitude = torch.ones(pixels)
            cos, sin = torch.cos(theta), torch.sin(theta)
        else:
            real, imag = speckle_field(seed, pixels, band)
            modulus = torch.sqrt(real**2 + imag**2)
            amplitude, cos, sin = modulus.float(), (real / modulus).float(), (imag / modulus).float()
        return cls(kind, cos.to(device), sin.to(device), amplitude.to(device))

    @classmethod
    def of_profile(cls, profile: SimulatedProfile, device: torch.device) -> ReferenceField:
        """The reference at the pixels ``profile`` reads."""
        return cls.build(profile.reference_field, profile.seed, profile.out_features, device, profile_band(profile))

    @property
    def flat(self) -> bool:
        return self.kind == "flat"

    @cached_property
    def intensity(self) -> torch.Tensor:
        """``s_j = |u_j|^2`` (mean 1 over pixels for speckle; 1 for a flat beam)."""
        return self.amplitude.double() ** 2

    @cached_property
    def field_cos(self) -> torch.Tensor:
        """``Re(u_j)``: the field the camera adds to the input's (the unit phasor times the amplitude)."""
        return self.cos * self.amplitude

    @cached_property
    def field_sin(self) -> torch.Tensor:
        """``Im(u_j)``."""
        return self.sin * self.amplitude

    @cached_property
    def brightest(self) -> float:
        """``max_j s_j``: the pixel whose noise bound is the lowest."""
        return float(self.intensity.max())

    @cached_property
    def dimmest(self) -> float:
        """``min_j s_j``."""
        return float(self.intensity.min())

    @cached_property
    def mean_intensity(self) -> float:
        """``mean_j s_j`` (1 for a flat beam; near 1 for speckle read at every pixel)."""
        return float(self.intensity.mean())

    @cached_property
    def mean_inverse(self) -> float:
        """``mean_j 1 / s_j``: how much the dim reference pixels add to the mean noise variance."""
        return float((1.0 / self.intensity).mean())


def speckle_field(seed: int, pixels: int, band: tuple[float, float] | None) -> tuple[torch.Tensor, torch.Tensor]:
    """``u_j`` (float64 real and imaginary parts) at the first ``pixels`` sensor pixels whose intensity
    lies in ``band`` (all pixels when None): the anchor's mirrors through the medium, one column a pixel."""
    fraction = 1.0 if band is None else math.exp(-band[0]) - math.exp(-band[1])  # P(s in band), s ~ Exp(1)
    if fraction < 1e-4:
        raise ValueError(f"reference_band {list(band or ())} keeps a fraction {fraction:.2g} of the pixels")
    candidates = pixels if band is None else int(pixels / fraction * 1.2) + 64
    while True:
        medium = TransmissionMatrix(ANCHOR_MIRRORS, candidates, stream_seed(seed, "reference-mirrors"), 64 << 20, 0)
        real, imag = (
            part[0].double() / math.sqrt(ANCHOR_MIRRORS) for part in medium.field(torch.ones(1, ANCHOR_MIRRORS))
        )
        if band is None:
            return real, imag
        intensity = real**2 + imag**2
        kept = torch.nonzero((intensity >= band[0]) & (intensity <= band[1])).flatten()[:pixels]
        if kept.numel() == pixels:
            return real[kept], imag[kept]
        candidates *= 2
