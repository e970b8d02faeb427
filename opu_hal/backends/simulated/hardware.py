"""The simulated OPU's hardware: optics, reference field (:mod:`.reference`), sensor at its operating
point, capabilities, raw camera frames and the privacy noise of anchor-only reads (:mod:`.privacy_noise`).

:class:`SimulatedHardware` is what :class:`.device.SimulatedDevice` projects with; the projection and
its declared noise model (the derivation in :mod:`.device`'s docstring) are there.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from ...camera.pixel_maps import dark_signal_map, light_response_map
from ...contract.anchor_map import AnchorBoundMap
from ...contract.capabilities import Capabilities
from ...contract.device import Device
from ...contract.errors import CalibrationError
from ...contract.frames import RawFrames
from ...contract.noise import PrivacyCounts
from ...contract.profile_base import CAMERA_PIXELS, DMD_MIRRORS
from ...randomness.secure_random import SecureGenerator
from ...randomness.seeding import stream_seed
from ...runtime.compute import resolve_torch_device
from ...runtime.memory import check_rows_fit
from .camera import Sensor, profile_sensor
from .dither import check_dithered
from .optics import TransmissionMatrix
from .photons import electrons_per_pixel
from .privacy_noise import (
    CLIP_LIMIT,
    check_privacy_source,
    clip_probability,
    digitized_law,
    draw_counts,
    draw_digitized,
)
from .profile import SimulatedProfile
from .raw_frames import raw_frames
from .reference import ReferenceField
from .speckle import speckle_anchor
from .speckle_digitized import calibrated_bounds, draw_speckle_digitized, speckle_law
from .speckle_privacy import SpecklePrivacy, sensor_ceiling_e

MIB = 1 << 20
PEAK_FACTOR = 12  # float32 copies of a row's input and output at the projection's peak


class SimulatedHardware(Device[SimulatedProfile]):
    """The simulated OPU's optics, sensor and operating point; projections are :class:`.device.SimulatedDevice`'s."""

    def __init__(self, profile: SimulatedProfile) -> None:
        super().__init__(profile)
        self._temperature_c = profile.temperature_c
        self._exposure_us = profile.exposure_us
        self.compute = resolve_torch_device(profile.compute, key="compute")
        self._optics = TransmissionMatrix(
            profile.in_features,
            profile.out_features,
            stream_seed(profile.seed, "matrix"),
            block_bytes=int(profile.block_mb * MIB),
            cache_bytes=int(profile.cache_mb * MIB),
            device=self.compute,
        )
        self._check_rounding_is_dithered()
        self.reference = ReferenceField.of_profile(profile, self.compute)
        # camera frames: training-quality noise from a seeded stream on the compute device
        self._camera_generator = torch.Generator(self.compute).manual_seed(stream_seed(profile.seed, "camera"))
        self._privacy_generator = SecureGenerator()  # never seeded: privacy counts are secret
        dark_map = dark_signal_map(
            profile.seed, profile.out_features, profile.dsnu_rms, profile.hot_pixel_fraction, profile.hot_pixel_factor
        )
        self._dark_map = None if dark_map is None else dark_map.to(self.compute)
        self._prnu, self._anchor_profile = light_response_map(
            profile.seed, profile.out_features, profile.prnu_rms, profile.anchor_falloff
        )
        self.saturated_pixels = 0
        self._speckle: SpecklePrivacy | None = None  # built on first use (the whole sensor's speckle)

    def _check_rounding_is_dithered(self) -> None:
        """:func:`.dither.check_dithered` at this profile's anchor and signal electrons."""
        check_dithered(self._profile, self.anchor_e, self.signal_e)

    # -- operating point ---------------------------------------------------------------------
    @property
    def temperature_c(self) -> float:
        return self._temperature_c

    @property
    def optics(self) -> TransmissionMatrix:
        """The transmission medium (blocks, fields), for inspection."""
        return self._optics

    def _apply_options(self, options: dict[str, float]) -> None:
        if "temperature_c" in options and self._calibration is not None:
            self._calibration.check_operating_point(options["temperature_c"], self._exposure_us)
        self._temperature_c = options.get("temperature_c", self._temperature_c)
        if "speckle_values_per_draw" in options:  # picks the digitized speckle threshold (speckle_bins)
            self.speckle.values_per_draw = int(options["speckle_values_per_draw"])

    @property
    def sensor(self) -> Sensor:
        return profile_sensor(self._profile, self._temperature_c, self._exposure_us, self._dark_map)

    @property
    def signal_e(self) -> float:
        """``Phi``: mean electrons per pixel with every mirror on."""
        return electrons_per_pixel(self._profile.laser_power_uw, self._profile, self._exposure_us)

    @property
    def anchor_e(self) -> float:
        """``A^2``: anchor electrons per pixel."""
        return electrons_per_pixel(self._profile.anchor_power_uw, self._profile, self._exposure_us)

    def _check_memory(self, rows: int) -> None:
        check_rows_fit(rows, self.in_features, self.out_features, PEAK_FACTOR, self._profile.label)

    def _describe(self) -> Capabilities:
        return Capabilities(
            input_kind="binary",
            output_kind=self._profile.mode,
            max_in_features=DMD_MIRRORS,
            max_out_features=CAMERA_PIXELS,
            # bounds: the profile's temperature_min_c / temperature_max_c
            settable={"temperature_c": self._temperature_range()}
            | ({"speckle_values_per_draw": (1, 1e9, "values")} if self._profile.privacy_anchor == "speckle" else {}),
            compute_device=self.compute.type,
            privacy_noise=self._privacy_source_ok(),
            raw_frames=True,
            calibratable=True,
            digitized_noise=self._digitized_source_ok(),
        )

    def _temperature_range(self) -> tuple[float, float, str]:
        """The profile's temperature bounds, narrowed to the calibrated range when calibrated."""
        low, high = self._profile.temperature_min_c, self._profile.temperature_max_c
        if self._calibration is not None:
            cal_low, cal_high = self._calibration.temperature_range_c
            low, high = max(low, cal_low), min(high, cal_high)
        return (low, high, "C")

    # -- privacy noise (opu_hal.privacy.skellam; see privacy_noise.py) -------------------------
    def _anchor_reads_e(self) -> torch.Tensor | float:
        """Mean electrons of one anchor-only read at each pixel: ``A^2 w_j + D_j`` (``w_j``: PRNU
        times the anchor's profile, :func:`opu_hal.camera.pixel_maps.light_response_map`)."""
        light: torch.Tensor | float = self.anchor_e
        for factor in (self._prnu, self._anchor_profile):
            if factor is not None:
                light = light * factor.double()
        dark = self.sensor.pixel_dark_e
        return light + (dark.double().cpu() if isinstance(dark, torch.Tensor) else dark)

    @property
    def anchor_read_e(self) -> float:
        """Mean photo-electrons of one anchor-only read at the dimmest pixel (``A^2 + D`` on a flat,
        uniform sensor): privacy counts are drawn with it, never more than any pixel gives."""
        reads = self._anchor_reads_e()
        return float(reads.min()) if isinstance(reads, torch.Tensor) else float(reads)

    @property
    def brightest_anchor_read_e(self) -> float:
        """Mean electrons of one anchor-only read at the brightest pixel (what may clip)."""
        reads = self._anchor_reads_e()
        return float(reads.max()) if isinstance(reads, torch.Tensor) else float(reads)

    @property
    def speckle(self) -> SpecklePrivacy:
        """The speckle privacy anchor over the whole sensor, its draws and its drift checks."""
        if self._speckle is None:
            profile = self._profile
            self._speckle = SpecklePrivacy(
                speckle_anchor(profile),
                profile.label,
                profile.anchor_check_every,
                profile.speckle_max_overshoot,
                profile.speckle_band,
            )
        return self._speckle

    def anchor_means_e(self) -> np.ndarray:
        """The speckle anchor's true mean electrons per read at every sensor pixel (hidden truth)."""
        return self.speckle.anchor.means_e(self.anchor_e, self.sensor)

    def _privacy_source_ok(self) -> bool:
        sensor = self.sensor
        proves_unity = getattr(self._calibration, "proves_unity_gain", None)  # the calibration decides, not the profile
        unity_not_refuted = abs(sensor.gain_e_per_dn - 1.0) <= 1e-12 and (not callable(proves_unity) or proves_unity())
        if self._profile.privacy_anchor == "speckle":
            mean = self.anchor_e + sensor.dark_e
            return unity_not_refuted and clip_probability(mean, sensor) <= CLIP_LIMIT
        return (
            unity_not_refuted
            and self.anchor_read_e > 0
            and clip_probability(self.brightest_anchor_read_e, sensor) <= CLIP_LIMIT
        )

    def draw_privacy_counts(self, n_values: int, poisson_mean: float) -> PrivacyCounts:
        """Skellam noise from summed anchor-only reads, drawn from the secure generator. With a
        profile calibration, the number of reads is planned with the calibration's lower bound on
        one read's mean (never the model's value), so the accounted mean is at most the applied one."""
        self.open()
        if self._profile.privacy_anchor == "speckle":
            return self._draw_speckle_counts(n_values, poisson_mean)
        lower, source = (None, "model (the profile's declared camera)")
        if self._calibration is not None:
            check_unity_gain = getattr(self._calibration, "check_unity_gain", None)
            if not callable(check_unity_gain):
                raise CalibrationError(
                    f"this calibration ({type(self._calibration).__name__}) has no unity-gain check: "
                    "the Skellam privacy source reads electrons as DN one to one and needs it"
                )
            check_unity_gain()
            lower, source = self._calibration.anchor_read_lower_e(self._temperature_c)
        profile = self._profile
        frame_time_s = max(profile.frame_period_us, self._exposure_us) * 1e-6
        return draw_counts(
            self._privacy_generator,
            self.sensor,
            self.anchor_read_e,
            n_values,
            poisson_mean,
            profile.label,
            read_mean_lower_e=lower,
            mean_source=source,
            pixels_per_frame=profile.sensor_pixels,
            frame_time_s=frame_time_s,
            brightest_read_e=self.brightest_anchor_read_e,
        )

    def _speckle_bounds(self) -> tuple[AnchorBoundMap, float | None]:
        """The calibration's per-pixel bound map and clip ceiling, or the model's own means (no calibration)."""
        if self._calibration is None:
            return self.speckle.uncalibrated_bounds(self.anchor_means_e()), None
        return calibrated_bounds(self._calibration, self._profile.label, self._temperature_c, self._exposure_us)

    def _draw_speckle_counts(self, n_values: int, poisson_mean: float) -> PrivacyCounts:
        """Counts at each kept pixel's own mean, planned with the calibration's per-pixel bound map; a
        calibration must prove unity gain (else the digitized speckle route, :meth:`draw_digitized_counts`)."""
        if self._calibration is not None:
            check_unity_gain = getattr(self._calibration, "check_unity_gain", None)
            if not callable(check_unity_gain):
                raise CalibrationError(
                    f"this calibration ({type(self._calibration).__name__}) has no unity-gain check: "
                    "the speckle Skellam source reads electrons as DN one to one and needs it"
                )
            check_unity_gain()
        check_privacy_source(self.sensor, self.anchor_e, self._profile.label)  # the simulation's truth
        bounds, ceiling = self._speckle_bounds()
        frame_s = max(self._profile.frame_period_us, self._exposure_us) * 1e-6
        return self.speckle.draw(
            self._privacy_generator,
            self.sensor,
            bounds,
            self.anchor_means_e(),
            n_values,
            poisson_mean,
            frame_s,
            self._camera_generator,
            ceiling,
        )

    def anchor_frames(self, n_frames: int) -> Iterator[np.ndarray]:
        """``n_frames`` frames of the speckle anchor alone over the whole sensor, in DN (calibration)."""
        return self.speckle.anchor.frames_dn(self.anchor_means_e(), self.sensor, n_frames, self._camera_generator)

    def _digitized_source_ok(self) -> bool:
        sensor = self.sensor
        return self.anchor_read_e > 0 and 6 <= sensor.adc_bits <= 16 and sensor.read_noise_e > 0

    def digitized_read_law(self):
        """One anchor-only read's law: the profile's camera, or the calibration's box at this temperature;
        for a speckle anchor, per bin of the kept pixels' bounds (:mod:`.speckle_digitized`)."""
        profile = self._profile
        box = None if self._calibration is None else self._calibration.digitized_read_box(self._temperature_c)
        frame_s = max(profile.frame_period_us, self._exposure_us) * 1e-6
        if profile.privacy_anchor == "speckle":
            bounds, ceiling = self._speckle_bounds()
            selection = self.speckle.binned_selection(
                bounds, sensor_ceiling_e(self.sensor) if ceiling is None else ceiling
            )
            return speckle_law(self.sensor, selection, box, profile.label, bounds.source, frame_s, bounds.pixels)
        return digitized_law(self.sensor, self.anchor_read_e, profile.label, profile.sensor_pixels, frame_s, box)

    def draw_digitized_counts(self, n_values: int, reads: int) -> PrivacyCounts:
        """Sums of ``reads`` digitized anchor-only reads (any gain), from the secure generator; for a speckle
        anchor, each value's reads of one kept pixel at its true mean."""
        self.open()
        law = self.digitized_read_law()
        if self._profile.privacy_anchor == "speckle":
            bounds, ceiling = self._speckle_bounds()
            selection = self.speckle.binned_selection(
                bounds, sensor_ceiling_e(self.sensor) if ceiling is None else ceiling
            )
            args = (self._privacy_generator, self.sensor, bounds, selection, law, self.anchor_means_e())
            return draw_speckle_digitized(self.speckle, *args, n_values, reads, self._camera_generator)
        return draw_digitized(self._privacy_generator, self.sensor, self.anchor_read_e, law, n_values, reads)

    # -- raw camera frames (calibration) -------------------------------------------------------
    def raw_frames(
        self,
        illumination: str,
        n_frames: int,
        *,
        exposure_us: float | None = None,
        anchor_power_uw: float | None = None,
        pattern: torch.Tensor | None = None,
    ) -> RawFrames:
        """Camera frames in DN at the current temperature: see :func:`.raw_frames.raw_frames`."""
        return raw_frames(
            self._profile,
            self.sensor,
            self._optics,
            self._camera_generator,
            illumination,
            n_frames,
            exposure_us=exposure_us,
            anchor_power_uw=anchor_power_uw,
            pattern=pattern,
            prnu=self._prnu,
            anchor_profile=self._anchor_profile,
        )
