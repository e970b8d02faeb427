"""Camera sensor model of the simulated OPU (Konnik and Welsh 2014, "High-level numerical
simulations of noise in CCD and CMOS photosensors").

One frame of a pixel whose expected photo-electron count is ``s`` is read as

    e   = Poisson(s + D)                      photon shot noise and dark-current shot noise
    e   = min(e, full_well) + N(0, sigma_r^2)  full-well saturation, then read noise
    DN  = clip(round(e / g) + black, 0, 2^bits - 1)   gain g (e-/DN), ADC offset, bit depth

with the dark signal ``D = D_R(T) * t_exp`` (times a fixed per-pixel multiplier where the profile
asks for dark-signal non-uniformity and hot pixels, :mod:`.dark_map`) and the dark-current rate (Konnik and Welsh eq. for
dark current, after Janesick)

    D_R(T) = 2.55e15 * P_A * D_FM * T^1.5 * exp(-E_g(T) / (2 k T))      [e-/s/pixel]

where ``P_A`` is the pixel area [cm^2], ``D_FM`` the dark-current figure of merit at 300 K
[nA/cm^2], and the silicon band gap follows Varshni, ``E_g(T) = E_g(0) - alpha T^2 / (T + beta)``
(``E_g(0) = 1.1557 eV``, ``alpha = 7.021e-4 eV/K``, ``beta = 1108 K``). The readout converts
back to electrons, ``e_hat = (DN - black) * g - D``; in the Gaussian approximation its variance is

    Var(e_hat) = s + D + sigma_r^2 + g^2 / 12                            (shot + dark + read + ADC)

The ADC term is rounding, a deterministic function of the noisy count (post-processing): it is
part of the noise in the values but never of the noise a privacy bound may rely on. The Gaussian
approximation of rounding needs the frame noise to exceed about half a step (``g / 2``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ...compute import compiled_ready, triton_ready
from ...poisson import poisson, poisson_constant

BOLTZMANN_EV_PER_K = 8.617333262e-5
KELVIN_OFFSET = 273.15
SILICON_EG0_EV = 1.1557
SILICON_VARSHNI_ALPHA_EV_PER_K = 7.021e-4
SILICON_VARSHNI_BETA_K = 1108.0


def band_gap_ev(temperature_k: float) -> float:
    """Silicon band gap by the Varshni relation [eV]."""
    t = temperature_k
    return SILICON_EG0_EV - SILICON_VARSHNI_ALPHA_EV_PER_K * t * t / (t + SILICON_VARSHNI_BETA_K)


def dark_current_rate(temperature_c: float, pixel_area_cm2: float, dark_fom_na_per_cm2: float) -> float:
    """Mean dark current [e-/s/pixel] at ``temperature_c`` (Konnik and Welsh 2014)."""
    t = temperature_c + KELVIN_OFFSET
    return (
        2.55e15 * pixel_area_cm2 * dark_fom_na_per_cm2 * t**1.5
        * math.exp(-band_gap_ev(t) / (2 * BOLTZMANN_EV_PER_K * t))
    )


def shot_noise(mean_e: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Exact Poisson counts in eager torch: ``torch.poisson`` on the CPU, :func:`opu_hal.poisson.poisson`
    elsewhere (PTRS, the same algorithm on every device)."""
    if mean_e.device.type == "cpu":
        return torch.poisson(mean_e, generator=generator)
    return poisson(mean_e, generator)


@dataclass(frozen=True)
class Sensor:
    """Fixed camera parameters plus the operating point (temperature, exposure)."""

    temperature_c: float
    exposure_us: float
    pixel_pitch_um: float
    dark_fom_na_per_cm2: float
    read_noise_e: float
    gain_e_per_dn: float
    adc_bits: int
    black_level_dn: int
    full_well_e: float
    dark_map: torch.Tensor | None = field(default=None, compare=False)  # per-pixel DSNU (dark_map.py)

    @property
    def dark_e(self) -> float:
        """Mean dark electrons per pixel per exposure, ``D = D_R(T) t_exp``."""
        area_cm2 = (self.pixel_pitch_um * 1e-4) ** 2
        rate = dark_current_rate(self.temperature_c, area_cm2, self.dark_fom_na_per_cm2)
        return rate * self.exposure_us * 1e-6

    @property
    def pixel_dark_e(self) -> torch.Tensor | float:
        """Mean dark electrons of each pixel: ``D`` times its DSNU / hot-pixel multiplier."""
        return self.dark_e if self.dark_map is None else self.dark_e * self.dark_map

    @property
    def min_dark_e(self) -> float:
        """Dark electrons of the darkest pixel (what a per-coordinate lower bound may use)."""
        return self.dark_e if self.dark_map is None else self.dark_e * float(self.dark_map.min())

    @property
    def max_dn(self) -> int:
        return 2**self.adc_bits - 1

    @property
    def saturation_e(self) -> float:
        """Electron count above which a frame clips (full well or top of the ADC)."""
        adc_top = (self.max_dn - self.black_level_dn) * self.gain_e_per_dn
        return min(self.full_well_e, adc_top)

    @property
    def random_floor_e2(self) -> float:
        """Signal-independent random variance of one frame: dark shot + read noise [e-^2]."""
        return self.dark_e + self.read_noise_e**2

    @property
    def quantization_e2(self) -> float:
        """Variance of ADC rounding, ``g^2 / 12`` [e-^2]: deterministic, so never privacy noise."""
        return self.gain_e_per_dn**2 / 12.0

    def read(self, signal_e: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, int]:
        """One noisy frame in electrons (dark-subtracted) and the number of clipped pixels."""
        if triton_ready(signal_e.device):
            return self._read_fused(signal_e, tuple(signal_e.shape), generator, signal_e.device)
        if compiled_ready(signal_e.device):
            return self._read_compiled(signal_e + self.pixel_dark_e, generator)
        return self._digitize(shot_noise(signal_e + self.pixel_dark_e, generator), generator)

    def _read_compiled(self, rates_e: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, int]:
        """:meth:`read` on the CPU in compiled passes (:mod:`opu_hal.compiled.camera`): exact counts
        and the same digitization, faster than ``torch.poisson`` and the eager digitization.
        ``rates_e``: signal plus dark electrons per pixel."""
        from ...compiled.camera import camera_read

        return camera_read(rates_e, self.pixel_dark_e, generator, **self._adc)

    @property
    def _adc(self) -> dict[str, float]:
        """Full well, read noise and ADC parameters, as the compiled and fused kernels take them."""
        return {"full_well_e": self.full_well_e, "read_noise_e": self.read_noise_e,
                "gain_e_per_dn": self.gain_e_per_dn, "black_level_dn": self.black_level_dn,
                "max_dn": self.max_dn}

    def _read_fused(self, signal_e: torch.Tensor | float, shape: tuple[int, ...], generator: torch.Generator,
                    device: torch.device) -> tuple[torch.Tensor, int]:
        """:meth:`read` in one GPU kernel (:mod:`opu_hal.triton_camera`): the same counts and
        digitization, without the eager path's few dozen launches and synchronizations."""
        from ...triton_camera import camera_read

        electrons, clipped = camera_read(signal_e, shape, self.pixel_dark_e, generator, device, **self._adc)
        return electrons, int(clipped)

    def read_linear(self, real: torch.Tensor, imag: torch.Tensor, anchor_cos: torch.Tensor,
                    anchor_sin: torch.Tensor, anchor_e: float, generator: torch.Generator,
                    ) -> tuple[torch.Tensor, int, float]:
        """The three frames of a linear-mode read, ``e_2`` of ``|z|^2``, ``e_1`` of ``|z + a|^2`` and
        ``e_3`` of the anchor alone (``a = sqrt(anchor_e) e^{i theta}``, ``z = real + i imag``):
        ``(e_1 - e_2 - e_3, clipped reads, mean of |z + a|^2 + |z|^2)``. On the CPU the three are
        fused (:mod:`opu_hal.compiled.linear`, the same values as three reads)."""
        if compiled_ready(real.device):
            from ...compiled.linear import linear_frames

            return linear_frames(real, imag, anchor_cos, anchor_sin, anchor_e, self.pixel_dark_e, generator, **self._adc)
        return self._read_linear_frames(real, imag, anchor_cos, anchor_sin, anchor_e, generator)

    def _read_linear_frames(self, real: torch.Tensor, imag: torch.Tensor, anchor_cos: torch.Tensor,
                            anchor_sin: torch.Tensor, anchor_e: float, generator: torch.Generator,
                            ) -> tuple[torch.Tensor, int, float]:
        """:meth:`read_linear` as three separate reads (any device)."""
        signal = real**2 + imag**2
        e2, clipped = self.read(signal, generator)
        amplitude = math.sqrt(anchor_e)
        with_anchor = (real + amplitude * anchor_cos) ** 2 + (imag + amplitude * anchor_sin) ** 2
        e1, clipped1 = self.read(with_anchor, generator)
        e3, clipped3 = self.read_flat(anchor_e, tuple(signal.shape), generator, signal.device)
        mean_frames = float(with_anchor.mean() + signal.mean())  # one synchronization
        return e1 - e2 - e3, clipped + clipped1 + clipped3, mean_frames

    def read_flat(self, signal_e: float, shape: tuple[int, ...], generator: torch.Generator,
                  device: torch.device) -> tuple[torch.Tensor, int]:
        """:meth:`read` of a flat field of ``signal_e`` electrons at every pixel (the anchor alone),
        with the same distribution: ``Poisson(s + D_j) = Poisson(s) + Poisson(D_j)`` for independent
        counts, and ``Poisson(s)`` of one mean for all pixels is drawn by inverse CDF from one table
        (:func:`opu_hal.poisson.quantile_table`; compiled on the CPU), faster than a draw per pixel."""
        if triton_ready(torch.device(device)):
            return self._read_fused(float(signal_e), shape, generator, torch.device(device))
        if compiled_ready(torch.device(device)):
            from ...compiled.camera import camera_read_flat

            return camera_read_flat(float(signal_e), shape, self.pixel_dark_e, generator, **self._adc)
        dark = self.pixel_dark_e
        numel = math.prod(shape)
        if isinstance(dark, torch.Tensor):
            counts = poisson_constant(signal_e, numel, generator, device).view(shape)
            counts += shot_noise(dark.expand(shape).contiguous(), generator)
        else:
            counts = poisson_constant(signal_e + dark, numel, generator, device).view(shape)
        return self._digitize(counts, generator)

    def _digitize(self, electrons: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, int]:
        """Full well, read noise, ADC rounding and range; back to dark-subtracted electrons."""
        dark = self.pixel_dark_e
        clipped = electrons > self.full_well_e
        electrons = torch.minimum(electrons, torch.full_like(electrons, self.full_well_e))
        if self.read_noise_e > 0:
            electrons = electrons + self.read_noise_e * torch.randn(
                electrons.shape, generator=generator, dtype=electrons.dtype, device=electrons.device
            )
        dn = torch.round(electrons / self.gain_e_per_dn) + self.black_level_dn
        clipped |= (dn < 0) | (dn > self.max_dn)
        dn = dn.clamp_(0, self.max_dn)
        return (dn - self.black_level_dn) * self.gain_e_per_dn - dark, int(clipped.sum())
