"""Frames of the simulated OPU's camera, drawn from :mod:`opu_hal.camera.physics`: exact Poisson
counts, full well, read noise and ADC, in eager torch, compiled on the CPU or fused on the GPU."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

import torch

from ...camera.physics import SensorPhysics
from ...kernels.poisson import poisson, poisson_constant
from ...runtime.compute import compiled_ready, triton_ready

if TYPE_CHECKING:
    from .profile import SimulatedProfile


def shot_noise(mean_e: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Exact Poisson counts in eager torch: ``torch.poisson`` on the CPU, :func:`opu_hal.kernels.poisson.poisson`
    elsewhere (PTRS, the same algorithm on every device)."""
    if mean_e.device.type == "cpu":
        return torch.poisson(mean_e, generator=generator)
    return poisson(mean_e, generator)


class AdcParameters(TypedDict):
    """Full well, read noise and ADC parameters, as the compiled and fused camera kernels take them."""

    full_well_e: float
    read_noise_e: float
    gain_e_per_dn: float
    black_level_dn: float
    max_dn: float


@dataclass(frozen=True)
class Sensor(SensorPhysics):
    """A :class:`~opu_hal.camera.physics.SensorPhysics` that draws frames."""

    def read(self, signal_e: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, int]:
        """One noisy frame in electrons (dark-subtracted) and the number of clipped pixels."""
        if triton_ready(signal_e.device):
            return self._read_fused(signal_e, tuple(signal_e.shape), generator, signal_e.device)
        if compiled_ready(signal_e.device):
            return self._read_compiled(signal_e + self.pixel_dark_e, generator)
        return self._digitize(shot_noise(signal_e + self.pixel_dark_e, generator), generator)

    def _read_compiled(self, rates_e: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, int]:
        """:meth:`read` on the CPU in compiled passes (:mod:`opu_hal.kernels.compiled.camera`): exact counts
        and the same digitization, faster than ``torch.poisson`` and the eager digitization.
        ``rates_e``: signal plus dark electrons per pixel."""
        from ...kernels.compiled.camera import camera_read

        return camera_read(rates_e, self.pixel_dark_e, generator, **self._adc)

    @property
    def _adc(self) -> AdcParameters:
        """Full well, read noise and ADC parameters, as the compiled and fused kernels take them."""
        return {
            "full_well_e": self.full_well_e,
            "read_noise_e": self.read_noise_e,
            "gain_e_per_dn": self.gain_e_per_dn,
            "black_level_dn": self.black_level_dn,
            "max_dn": self.max_dn,
        }

    def _read_fused(
        self, signal_e: torch.Tensor | float, shape: tuple[int, ...], generator: torch.Generator, device: torch.device
    ) -> tuple[torch.Tensor, int]:
        """:meth:`read` in one GPU kernel (:mod:`opu_hal.kernels.triton_camera`): the same counts and
        digitization, without the eager path's few dozen launches and synchronizations."""
        from ...kernels.triton_camera import camera_read

        electrons, clipped = camera_read(signal_e, shape, self.pixel_dark_e, generator, device, **self._adc)
        return electrons, int(clipped)

    def read_linear(
        self,
        real: torch.Tensor,
        imag: torch.Tensor,
        anchor_cos: torch.Tensor,
        anchor_sin: torch.Tensor,
        anchor_e: float,
        generator: torch.Generator,
        separate: bool = False,
        reference_intensity: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, int, float, float]:
        """The three frames of a linear-mode read, ``e_2`` of ``|z|^2``, ``e_1`` of ``|z + a|^2`` and
        ``e_3`` of the anchor alone (``a = sqrt(anchor_e) (anchor_cos + i anchor_sin)``, ``z = real + i imag``):
        ``(e_1 - e_2 - e_3, clipped reads, mean of |z + a|^2 + |z|^2, the same over s_j)``. On the CPU the three are
        fused (:mod:`opu_hal.kernels.compiled.linear`, the same values as three reads), on a GPU in
        one kernel (:mod:`opu_hal.kernels.triton_linear`), unless ``separate`` asks for three
        separate reads (any device).

        ``reference_intensity`` (``s_j = anchor_cos^2 + anchor_sin^2`` per pixel, a speckle reference,
        :mod:`.reference`): the anchor frame is read at each pixel's own ``anchor_e s_j`` (fused on the CPU,
        three separate reads on a GPU, whose kernel takes one anchor mean), and the last value is the mean of
        ``(|z + a|^2 + |z|^2) / s_j``, what the pixels' own noise variances average (:mod:`.reference`); for a
        flat beam it is the mean before it."""
        speckle = reference_intensity
        if triton_ready(real.device) and not separate and speckle is None:
            from ...kernels.triton_linear import linear_frames as fused_frames

            fused = fused_frames(
                real, imag, anchor_cos, anchor_sin, anchor_e, self.pixel_dark_e, generator, **self._adc
            )
            return (*fused, fused[2])
        if compiled_ready(real.device) and not separate:
            from ...kernels.compiled.linear import linear_frames

            return linear_frames(
                real, imag, anchor_cos, anchor_sin, anchor_e, self.pixel_dark_e, generator, speckle, **self._adc
            )
        signal = real**2 + imag**2
        e2, clipped = self.read(signal, generator)
        amplitude = math.sqrt(anchor_e)
        with_anchor = (real + amplitude * anchor_cos) ** 2 + (imag + amplitude * anchor_sin) ** 2
        e1, clipped1 = self.read(with_anchor, generator)
        if speckle is None:
            e3, clipped3 = self.read_flat(anchor_e, tuple(signal.shape), generator, signal.device)
        else:  # each pixel's anchor at its own mean
            e3, clipped3 = self.read((anchor_e * speckle).to(signal.dtype).expand(signal.shape).contiguous(), generator)
        mean_frames = float(with_anchor.mean() + signal.mean())  # one synchronization
        weighted = mean_frames if speckle is None else float(((with_anchor + signal) / speckle.to(signal.dtype)).mean())
        return e1 - e2 - e3, clipped + clipped1 + clipped3, mean_frames, weighted

    def read_flat(
        self, signal_e: float, shape: tuple[int, ...], generator: torch.Generator, device: torch.device
    ) -> tuple[torch.Tensor, int]:
        """:meth:`read` of a flat field of ``signal_e`` electrons at every pixel (the anchor alone),
        with the same distribution: ``Poisson(s + D_j) = Poisson(s) + Poisson(D_j)`` for independent
        counts, and ``Poisson(s)`` of one mean for all pixels is drawn by inverse CDF from one table
        (:func:`opu_hal.kernels.poisson.quantile_table`; compiled on the CPU), faster than a draw per pixel."""
        if triton_ready(torch.device(device)):
            return self._read_fused(float(signal_e), shape, generator, torch.device(device))
        if compiled_ready(torch.device(device)):
            from ...kernels.compiled.camera import camera_read_flat

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


def profile_sensor(
    profile: SimulatedProfile, temperature_c: float, exposure_us: float, dark_map: torch.Tensor | None = None
) -> Sensor:
    """The camera of a simulated ``profile`` at an operating point (``dark_map``: its per-pixel DSNU)."""
    return Sensor(
        temperature_c=temperature_c,
        exposure_us=exposure_us,
        pixel_pitch_um=profile.pixel_pitch_um,
        dark_fom_na_per_cm2=profile.dark_fom_na_per_cm2,
        read_noise_e=profile.read_noise_e,
        gain_e_per_dn=profile.gain_e_per_dn,
        adc_bits=profile.adc_bits,
        black_level_dn=profile.black_level_dn,
        full_well_e=profile.full_well_e,
        dark_map=dark_map,
        dark_activation_ev=profile.dark_activation_ev,
    )
