"""The simulated OPU: binary DMD input, complex Gaussian medium, camera frames, temperature.

Notation (per output pixel ``j``; electrons per pixel per exposure unless said otherwise):

- ``Phi = QE * P_signal * t_exp / (h c / lambda) / N_pixels``: mean signal with every mirror on.
- ``z = sqrt(Phi / n_in) * x T``, ``T_jk ~ CN(0, 1)``: the camera field of a DMD pattern ``x``.
- ``a_j = A exp(i theta_j)``, ``A^2 = QE * P_anchor * t_exp / (h c / lambda) / N_pixels``: the
  anchor (reference) field of a flat reference beam (``reference_field = "flat"``), fixed random
  phase. A LightOn OPU has none: under its speckle reference (the default) ``A^2`` is the mean over
  pixels, each pixel has its own ``A^2 s_j`` and is divided by its own amplitude, and the formulas
  below hold per pixel with ``A^2 s_j`` in place of ``A^2`` (:mod:`.reference`).

**Intensity mode** reads one frame ``e_2 = frame(|z|^2)`` and returns ``e_2 / Phi``, whose mean is
``|x T|^2 / n_in``; its variance is ``(|z|^2 + F) / Phi^2`` with ``F`` the camera's
signal-independent floor (dark shot + read + ADC rounding, see :mod:`.camera`).

**Linear mode** reads three frames, ``e_1 = frame(|z + a|^2)``, ``e_2 = frame(|z|^2)``,
``e_3 = frame(|a|^2)``, and uses ``|z + a|^2 - |z|^2 - |a|^2 = 2 Re(conj(a) z)``:

    y = (e_1 - e_2 - e_3) / (2 A) * sqrt(2 / Phi) = x B + g,   B_jk = sqrt(2 / n_in) Re(e^{-i theta_j} T_jk)

so ``B`` has i.i.d. ``N(0, 1 / n_in)`` entries, as paper 000's ``p = B x + g`` (eq. 5, 10). The
noise ``g`` is the three frames' noise propagated; frames are independent, so in the Gaussian
approximation

    Var(g_j) = (|z_j + a_j|^2 + |z_j|^2 + A^2 + 3 F) / (2 A^2 Phi).

It grows with the signal (shot noise). Its data-independent lower bound uses
``min_z |z + a|^2 + |z|^2 = A^2 / 2`` (at ``z = -a / 2``):

    Var(g_j) >= (1.5 A^2 + 3 F_r) / (2 A^2 Phi)      for every input        -> ``std_lower``

where ``F_r = D + sigma_r^2`` leaves out ADC rounding, which is deterministic post-processing of
the noisy frames and so may not count as privacy noise (intensity mode: ``F_r / Phi^2``).

The reported ``std`` is the root mean of ``Var(g_j)`` over the batch's entries (the Gaussian
approximation at the current operating point); :meth:`noise_report` without a batch gives it for
an input with half the mirrors on (``E|z|^2 = Phi / 2``). Temperature enters through the dark
signal in ``F``; exposure and laser/anchor power through ``Phi``, ``A^2`` and ``F``.
"""

from __future__ import annotations

import math
import warnings

import torch

from ...camera.physics import least_frames_e, output_variance, speckle_output_variance
from ...contract.noise import NoiseDistribution, NoiseReport, Projection
from ...runtime.compute import compiled_ready, triton_ready
from .hardware import SimulatedHardware
from .privacy_noise import clip_probability

CAMERA_GENERATOR = "Philox4x32-10 counters under keys drawn from a torch generator seeded by the profile"
EAGER_CAMERA_GENERATOR = "torch generator seeded by the profile"


class SaturationWarning(UserWarning):
    """Some camera pixels clipped: those values carry less noise than declared and are biased."""


class SimulatedDevice(SimulatedHardware):
    """Numerical twin of a LightOn OPU; its noise report is declared by the model above."""

    # -- noise model ---------------------------------------------------------------------------
    def _output_variance(
        self,
        frames_signal_e: torch.Tensor | float,
        *,
        random_only: bool = False,
        dark_e: float | None = None,
    ):
        """Variance in output units of a value whose frames sum to ``frames_signal_e`` electrons.

        ``random_only`` leaves out ADC rounding (deterministic post-processing of the frames);
        ``dark_e`` replaces the mean dark signal (the darkest pixel's, for a lower bound).
        """
        sensor = self.sensor
        dark = sensor.dark_e if dark_e is None else dark_e
        floor = dark + sensor.read_noise_e**2 + (0.0 if random_only else sensor.quantization_e2)
        if self._speckle_reference:  # frames_signal_e: the mean of the frames over s_j (.reference)
            mean_inverse = self.reference.mean_inverse
            return speckle_output_variance(float(frames_signal_e), mean_inverse, self.signal_e, self.anchor_e, floor)
        return output_variance(self._profile.mode, frames_signal_e, self.signal_e, self.anchor_e, floor)

    def _use_calibration(self, calibration) -> None:
        """Under a speckle reference the calibrated ``std`` averages the pixels' own variances over
        ``mean_j 1 / s_j`` of the amplitudes this device divides by (:mod:`.reference`)."""
        if self._speckle_reference and hasattr(calibration, "reference_mean_inverse"):
            calibration.reference_mean_inverse = self.reference.mean_inverse

    @property
    def _speckle_reference(self) -> bool:
        return self._profile.mode == "linear" and not self.reference.flat

    def _lower_variance(self) -> float:
        """Data-independent, rounding-free lower bound of the output variance (module docstring),
        at the darkest pixel (DSNU, hot pixels): ``F_r = min_j D_j + sigma_r^2``; under a speckle
        reference at the brightest reference pixel, whose bound is the lowest (:mod:`.reference`)."""
        if self._profile.mode == "intensity":
            return float(self._output_variance(0.0, random_only=True, dark_e=self.sensor.min_dark_e))
        sensor = self.sensor
        anchor = self.anchor_e * self.reference.brightest
        floor = sensor.min_dark_e + sensor.read_noise_e**2
        return float(output_variance("linear", least_frames_e("linear", anchor), self.signal_e, anchor, floor))

    def _report(self, variance: float, frames_e: float | None = None) -> NoiseReport:
        if self._calibration is not None:
            return self._calibration.report(self._temperature_c)
        sensor = self.sensor
        lower = math.sqrt(self._lower_variance())
        std = math.sqrt(variance)
        return NoiseReport(
            std=max(std, lower),
            std_lower=lower,
            source="declared",
            temperature_c=self._temperature_c,
            exposure_us=self._exposure_us,
            details={
                "signal_e": self.signal_e,
                "anchor_e": self.anchor_e,
                "dark_e": sensor.dark_e,
                "read_noise_e": sensor.read_noise_e,
                "quantization_e2": sensor.quantization_e2,
            },
            distribution=self._distribution(frames_e),
        )

    def _distribution(self, frames_e: float | None) -> NoiseDistribution:
        """What a projection's noise is: Poisson counts of the frames behind each value (their mean
        electrons summed over the frames, and the input-independent lower bound), read noise, gain,
        the output units of one DN, and the probability an anchor read clips. The projection's
        frames come from the profile-seeded camera stream: training-quality noise, never privacy
        noise (that is :meth:`draw_privacy_counts`, from the secure generator)."""
        sensor = self.sensor
        linear = self._profile.mode == "linear"
        dimmest, brightest = self.reference.dimmest, self.reference.brightest
        lower = (1.5 * self.anchor_e * dimmest + 3 * sensor.dark_e) if linear else sensor.dark_e
        mean = frames_e if frames_e is not None else lower
        step = sensor.gain_e_per_dn * (  # the finest lattice: the brightest reference pixel's
            math.sqrt(2 / self.signal_e) / (2 * math.sqrt(self.anchor_e * brightest)) if linear else 1 / self.signal_e
        )
        return NoiseDistribution(
            kind="poisson-counts",
            generator=f"{self._camera_stream} (not for privacy)",
            poisson_mean=max(mean, lower),
            poisson_mean_lower=lower if lower > 0 else None,
            read_noise_e=sensor.read_noise_e,
            gain_e_per_dn=sensor.gain_e_per_dn,
            lattice_step=step,
            clip_probability=clip_probability(self.anchor_e * brightest + sensor.dark_e, sensor),
        )

    @property
    def _camera_stream(self) -> str:
        """Where the frames' randomness comes from: Philox counters on the CPU with Numba (compiled)
        and on a GPU with Triton (fused kernel), the generator's own draws on the eager paths."""
        compiled = compiled_ready(self.compute) or triton_ready(self.compute)
        return CAMERA_GENERATOR if compiled else EAGER_CAMERA_GENERATOR

    def noise_report(self) -> NoiseReport:
        """Noise for an input with half the mirrors on (``E|z|^2 = Phi / 2``)."""
        half = 0.5 * self.signal_e
        frames = half if self._profile.mode == "intensity" else 2 * half + self.anchor_e
        variance = self._output_variance(
            self.signal_e * self.reference.mean_inverse + self.anchor_e if self._speckle_reference else frames
        )
        return self._report(float(variance), frames + (0 if self._profile.mode == "intensity" else self.anchor_e))

    # -- projection ----------------------------------------------------------------------------
    def ideal(self, x: torch.Tensor) -> torch.Tensor:
        """The noiseless output for a binary batch: ``x B`` (linear) or ``|x T|^2 / n_in``."""
        real, imag = self._optics.field(x.float())
        if self._profile.mode == "intensity":
            return (real**2 + imag**2) / self.in_features
        return (real * self.reference.cos + imag * self.reference.sin) * math.sqrt(2 / self.in_features)

    def _project(self, x: torch.Tensor) -> Projection:
        real, imag = self._optics.field(x.float())
        field_scale = math.sqrt(self.signal_e / self.in_features)
        real.mul_(field_scale)
        imag.mul_(field_scale)
        sensor = self.sensor
        if self._profile.mode == "intensity":
            signal = real**2 + imag**2
            e2, clipped = sensor.read(signal, self._camera_generator)
            values = e2 / self.signal_e
            mean_frames = per_intensity = float(signal.mean())
        else:
            reference = self.reference
            speckle = None if reference.flat else reference.intensity
            difference, clipped, mean_frames, per_intensity = sensor.read_linear(
                real,
                imag,
                reference.field_cos,
                reference.field_sin,
                self.anchor_e,
                self._camera_generator,
                reference_intensity=speckle,
            )
            values = difference * (math.sqrt(2 / self.signal_e) / (2 * math.sqrt(self.anchor_e)))
            if not reference.flat:  # each pixel over its own reference amplitude (.reference)
                values = values / reference.amplitude
        if clipped:
            self.saturated_pixels += clipped
            warnings.warn(
                f"{clipped} camera pixel reads clipped (saturation or ADC range) in a batch of "
                f"{x.shape[0]}: lower laser_power_uw / anchor_power_uw / exposure_us, or the "
                "temperature; clipped values carry less noise than the report says",
                SaturationWarning,
                stacklevel=3,
            )
        # The variance is linear in the frame signal: its batch mean is the variance at the mean (under a
        # speckle reference at the frames' mean over s_j, .reference); the record's Poisson mean is the
        # three frames' plain mean.
        anchor = 0.0 if self._profile.mode == "intensity" else self.anchor_e * self.reference.mean_intensity
        variance = float(self._output_variance(per_intensity))
        return Projection(values=values, noise=self._report(variance, mean_frames + anchor))
