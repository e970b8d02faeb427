"""A device's noise report from its calibration (``source = "calibrated"``).

The best estimate ``std`` evaluates :func:`opu_hal.camera.physics.output_variance` with the point estimates
(dark signal from the fitted temperature law, or interpolated linearly between the measured
neighbours). ``std_lower`` evaluates the data-independent minimum with upper bounds of the signal
and anchor electrons and a lower bound of the floor (read-noise lower bound squared plus the
darkest pixel's dark lower bound *measured* at a calibrated temperature); between two calibrated
temperatures it is the smaller of the two neighbours' bounds, so it is never above either (no law
is extrapolated or trusted for the bound), and the order the temperatures were listed in is
irrelevant. Each bound is one side of a 95 % two-sided interval, so
jointly (Bonferroni over gain, anchor, read noise, dark) the bound holds with probability >= 90 %.
Outside the calibrated temperatures or exposures, or for another device, the device refuses.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Literal

from ..camera.physics import least_frames_e, output_variance, speckle_output_variance, typical_frames_e
from ..contract.anchor_map import AnchorBoundMap, clip_ceiling_e
from ..contract.calibration import ReadBox
from ..contract.errors import CalibrationError
from ..contract.noise import NoiseReport
from .anchor_map import anchor_map_path, anchor_map_point, load_anchor_map
from .identity import check_identity, check_profile
from .schema import Calibration, OperatingPointCalibration, read_calibration
from .temperature import law_rate


def calibration_path(profile) -> Path:
    """The profile's ``calibration`` key, resolved relative to the profile file."""
    path = Path(profile.calibration)
    if not path.is_absolute() and profile.source is not None:
        path = Path(profile.source).parent / path
    return path


class CalibratedNoise:
    """Noise reports of an OPU-like device at operating points its calibration covers."""

    def __init__(
        self,
        calibration: Calibration,
        path: Path,
        mode: Literal["linear", "intensity"],
        exposure_us: float,
        laser_power_uw: float,
        anchor_power_uw: float,
        *,
        signal: bool = True,  # False: anchor reads only (a digitized plan), no quantum efficiency needed
    ) -> None:
        self.calibration, self.path, self.mode = calibration, path, mode
        self.exposure_us, self.laser_power_uw, self.anchor_power_uw = exposure_us, laser_power_uw, anchor_power_uw
        #: Whether the linear mode's reference is speckle (a simulated OPU's default), not a flat beam.
        self.speckle = mode == "linear" and (calibration.device.physics or {}).get("reference_field") == "speckle"
        #: ``mean_j 1 / s_j`` of a speckle reference, set by the device that divides by it (None: not known).
        self.reference_mean_inverse: float | None = None
        #: The anchor map last read, and the point (C, us) it was measured at, keyed on the file's mtime and size.
        self._anchor_map: tuple[tuple[float, float, int, int], AnchorBoundMap] | None = None
        self._map_point: tuple[tuple[int, int], tuple[float, float]] | None = None
        if signal and (calibration.quantum_efficiency is None or calibration.photons_per_pixel_per_uw is None):
            raise CalibrationError(
                f"{path}: key 'quantum_efficiency' is missing: the signal electrons of a "
                "projection cannot be derived from this calibration"
            )
        self.check_operating_point(min(calibration.temperatures_c), exposure_us)

    @property
    def temperature_range_c(self) -> tuple[float, float]:
        return min(self.calibration.temperatures_c), max(self.calibration.temperatures_c)

    def check_device(self, device) -> None:
        check_identity(self.calibration, device, self.path)

    def check_operating_point(self, temperature_c: float, exposure_us: float) -> None:
        cal = self.calibration
        low, high = min(cal.temperatures_c), max(cal.temperatures_c)
        if not low <= temperature_c <= high:
            raise CalibrationError(
                f"temperature {temperature_c} C is outside the calibrated range [{low}, {high}] C of "
                f"{self.path}; calibrate at that temperature (temperatures)"
            )
        if not any(math.isclose(exposure_us, e, rel_tol=1e-9) for e in cal.exposures_us):
            raise CalibrationError(
                f"exposure {exposure_us} us is not among the calibrated exposures {cal.exposures_us} us of "
                f"{self.path}; calibrate at that exposure (exposures)"
            )

    def _points(self) -> list[OperatingPointCalibration]:
        return sorted(
            (
                p
                for p in self.calibration.operating_points
                if math.isclose(p.exposure_us, self.exposure_us, rel_tol=1e-9)
            ),
            key=lambda p: p.temperature_c,
        )

    def _electrons(self, which: str) -> tuple[float, float]:
        """(pixel mean, brightest pixel's upper bound) electrons of the signal (all mirrors on) or the
        anchor: the anchor's brightest pixel as measured (an uneven anchor), the signal's as the mean
        times the largest pixel response over a smooth illumination (PRNU, :mod:`.emva`)."""
        cal = self.calibration
        point = self._points()[0]
        if which == "anchor":
            scale = self.anchor_power_uw / point.anchor_power_uw
            return point.anchor_e.value * scale, max(point.anchor_e.upper, point.anchor_e_max_pixel_upper) * scale
        qe, per_uw = cal.quantum_efficiency, cal.photons_per_pixel_per_uw
        if qe is None or per_uw is None:  # refused in __init__; a calibration changed since is a bug
            raise CalibrationError(
                f"{self.path}: key 'quantum_efficiency' is missing: the signal electrons of a "
                "projection cannot be derived from this calibration"
            )
        photons = per_uw * self.laser_power_uw * self.exposure_us / cal.exposures_us[0]
        return qe.value * photons, qe.upper * photons * max(cal.uniformity.response_max_upper, 1.0)

    def unity_gain_error_dn(self) -> float:
        """The largest ``n |1/g - 1|`` over the gain's interval and every count ``n`` up to the saturation's
        upper end: how far [DN] a read may land from its electron count at some gain the calibration allows."""
        gain, full = self.calibration.gain_e_per_dn, max(self.calibration.saturation_e.upper, 1.0)
        return full * max(abs(1 / gain.lower - 1), abs(1 / gain.upper - 1))

    def proves_unity_gain(self) -> bool:
        """Whether every gain of the interval maps every count up to full scale to itself:
        ``n_max |1/g - 1| < 0.5``, so ``round(n / g) = n`` (docs/calibration.md, "Unity gain")."""
        return self.unity_gain_error_dn() < 0.5

    def check_unity_gain(self) -> None:
        """Refuse the Skellam privacy source unless the measured gain's interval proves unity gain
        (:meth:`proves_unity_gain`): an interval that merely holds 1 e-/DN does not (a camera at 1.004 e-/DN
        calibrates to about [0.992, 1.005]). Such a calibration goes through the digitized mechanism."""
        if not self.proves_unity_gain():
            gain = self.calibration.gain_e_per_dn
            raise CalibrationError(
                f"{self.path}: the measured gain's {gain.level:.0%} interval [{gain.lower:.5g}, {gain.upper:.5g}] e-/DN "
                f"(estimate {gain.value:.5g}) does not prove unity gain: at its ends a read of up to the saturation "
                f"({self.calibration.saturation_e.upper:.5g} e-) may land {self.unity_gain_error_dn():.3g} DN off its "
                "electron count (the Skellam privacy source needs under 0.5 DN, so that electrons map to DN one to one); "
                "use the digitized mechanism (any gain, accounted over the calibration's intervals)"
            )

    def neighbours(self, temperature_c: float) -> tuple[OperatingPointCalibration, OperatingPointCalibration]:
        """The calibrated points at this exposure just below and just above ``temperature_c`` (the same
        point twice at a calibrated temperature); refused outside the calibrated range."""
        self.check_operating_point(temperature_c, self.exposure_us)
        points = self._points()
        below = [p for p in points if p.temperature_c <= temperature_c][-1]
        above = next(p for p in points if p.temperature_c >= temperature_c)
        return below, above

    def _weight(self, temperature_c: float) -> tuple[OperatingPointCalibration, OperatingPointCalibration, float]:
        below, above = self.neighbours(temperature_c)
        span = above.temperature_c - below.temperature_c
        return below, above, 0.0 if span <= 0 else (temperature_c - below.temperature_c) / span

    def dark_e(self, temperature_c: float) -> float:
        """Point estimate of the mean dark electrons at ``temperature_c`` (law, or measured points
        interpolated linearly)."""
        law = self.calibration.temperature_law
        if law is not None:
            return float(law_rate(law, temperature_c) * self.exposure_us * 1e-6)
        below, above, w = self._weight(temperature_c)
        return max((1 - w) * below.dark_e.value + w * above.dark_e.value, 0.0)

    def anchor_read_lower_e(self, temperature_c: float) -> tuple[float, str]:
        """Lower confidence bound on the mean photo-electrons of one anchor-only read at the dimmest
        pixel at ``temperature_c``: the smaller of the bounds measured at the calibrated neighbours
        (never above either), scaled to this anchor power; and a line saying where it came from.
        Privacy counts are planned with it (issue 13)."""
        candidates = []
        for point in self.neighbours(temperature_c):
            if math.isclose(self.anchor_power_uw, point.anchor_power_uw, rel_tol=1e-12):
                lower = point.anchor_read_e_min_pixel_lower
            else:
                scale = self.anchor_power_uw / point.anchor_power_uw if point.anchor_power_uw > 0 else 0.0
                lower = min(point.anchor_e.lower, point.anchor_e_min_pixel_lower) * scale + point.dark_e_min_pixel_lower
            candidates.append((lower, point))
        lower, point = min(candidates, key=lambda c: c[0])
        level = point.anchor_e.level
        return lower, (
            f"calibration {self.path} (lower end of the {level:.0%} interval of the dimmest pixel's anchor read, "
            f"measured at {point.temperature_c:g} C, {point.exposure_us:g} us)"
        )

    def anchor_map(self, temperature_c: float, exposure_us: float) -> AnchorBoundMap | None:
        """The per-pixel bound map of the speckle anchor measured with this calibration (next to its
        file, :mod:`.anchor_map`), or None when there is none."""
        path = anchor_map_path(self.path)
        if not path.exists():
            return None
        stat = path.stat()  # read once per run (about 50 MB): again only when the file changes
        key = (float(temperature_c), float(exposure_us), stat.st_mtime_ns, stat.st_size)
        if self._anchor_map is None or self._anchor_map[0] != key:
            self._anchor_map = (key, load_anchor_map(path, temperature_c, exposure_us))
        return self._anchor_map[1]

    def clip_ceiling_e(self) -> float:
        """The largest anchor read mean that clips with probability at most 1e-24, from the measured
        saturation (lower end), black level (upper end) and read noise (upper end)."""
        cal = self.calibration
        bottom = -cal.black_level_dn.upper * cal.gain_e_per_dn.upper
        return clip_ceiling_e(cal.saturation_e.lower, bottom, cal.read_noise_e.upper)

    def _lower(self, point: OperatingPointCalibration, phi_up: float, a2_up: float) -> float:
        """``std_lower`` with the floor measured at one calibrated ``point``."""
        if self.speckle:  # the quietest pixel: the brightest reference
            brightest = self._brightest_reference_e(point)
            if brightest is None:  # no anchor map: 0.75 / Phi, the limit of any reference intensity
                return math.sqrt(0.75 / phi_up)
            a2_up = brightest
        floor_low = self.calibration.read_noise_e.lower**2 + point.dark_e_min_pixel_lower
        return math.sqrt(output_variance(self.mode, least_frames_e(self.mode, a2_up), phi_up, a2_up, floor_low))

    def _brightest_reference_e(self, point: OperatingPointCalibration) -> float | None:
        """Upper bound on the brightest reference pixel's light among the pixels a projection reads at
        ``point``'s exposure, or None without a map. The map holds light plus its own temperature's dark
        signal: an upper bound of the light at any temperature (scaled up to a longer exposure), and a
        larger value only lowers the noise bound it enters."""
        if (measured := self._reference_map()) is None:
            return None
        _, exposure, upper, _ = measured
        scaled = float(upper.max()) * max(point.exposure_us / exposure, 1.0)
        return scaled if math.isfinite(scaled) else None  # a pixel unbounded above: no floor share

    def _mean_inverse(self) -> float | None:
        """``mean_j 1 / s_j`` of a speckle reference over the pixels a projection reads: the device's (set
        when attached), else from the anchor map's estimates there (each pixel's light over their mean, the
        calibrated dark signal at the map's operating point subtracted, at least 1 e-), else None."""
        if self.reference_mean_inverse is not None or (measured := self._reference_map()) is None:
            return self.reference_mean_inverse
        celsius, exposure, _, estimate = measured
        dark = max(self.dark_e(celsius), 0.0) * exposure / self.exposure_us  # the law's, at the map's point
        light = (estimate - dark).clip(min=1.0)
        return float((light.mean() / light).mean())

    def _reference_map(self) -> tuple[float, float, Any, Any] | None:
        """The anchor map beside the calibration: its own operating point (C, us), and the upper bounds and
        estimates at the pixels a projection reads (its first ``out_features``); None without a map."""
        path = anchor_map_path(self.path)
        if not path.exists():
            return None
        stat = path.stat()
        key = (stat.st_mtime_ns, stat.st_size)
        if self._map_point is None or self._map_point[0] != key:
            self._map_point = (key, anchor_map_point(path))
        celsius, exposure = self._map_point[1]
        if (bounds := self.anchor_map(celsius, exposure)) is None:
            return None
        pixels = self.calibration.device.out_features
        return celsius, exposure, bounds.upper_e[:pixels], bounds.estimate_e[:pixels]

    def anchor_read_box(
        self, temperature_c: float
    ) -> tuple[tuple[float, float], tuple[float, float], tuple[float, float], str]:
        """The calibrated box of one anchor-only read (:class:`~opu_hal.contract.calibration.NoiseCalibration`):
        mean from :meth:`anchor_read_lower_e` to the upper ends of the anchor and dark intervals (scaled to
        this anchor power, the larger of the calibrated neighbours'), read noise and gain from their intervals."""
        lower, source = self.anchor_read_lower_e(temperature_c)
        upper = max(
            [lower]
            + [
                max(point.anchor_e.upper, point.anchor_e_max_pixel_upper)
                * (self.anchor_power_uw / point.anchor_power_uw)
                + max(point.dark_e.upper, 0.0)
                for point in self.neighbours(temperature_c)
            ]
        )
        cal = self.calibration
        return (
            (lower, upper),
            (cal.read_noise_e.lower, cal.read_noise_e.upper),
            (cal.gain_e_per_dn.lower, cal.gain_e_per_dn.upper),
            source.replace("lower end", "ends"),
        )

    def digitized_read_box(self, temperature_c: float) -> ReadBox:
        """Every quantity of one anchor-only read's law as measured (:mod:`.read_box`)."""
        from .read_box import calibrated_read_box

        return calibrated_read_box(self, temperature_c)

    def report(self, temperature_c: float) -> NoiseReport:
        """The noise at ``temperature_c`` (inside the calibrated range, else refused): ``std`` from
        the interpolated dark signal, ``std_lower`` the smaller of the neighbours' bounds."""
        cal = self.calibration
        below, above = self.neighbours(temperature_c)
        phi, phi_up = self._electrons("signal")
        a2, a2_up = self._electrons("anchor")
        g = cal.gain_e_per_dn.value
        dark = max(self.dark_e(temperature_c), 0.0)
        floor = cal.read_noise_e.value**2 + dark + g * g / 12
        std = math.sqrt(output_variance(self.mode, typical_frames_e(self.mode, phi, a2), phi, a2, floor))
        inverse = self._mean_inverse() if self.speckle else None
        if inverse is not None:  # the pixels' own variances averaged (backends/simulated/reference.py)
            std = math.sqrt(speckle_output_variance(phi * inverse + a2, inverse, phi, a2, floor))
        lower = min(self._lower(below, phi_up, a2_up), self._lower(above, phi_up, a2_up))
        return NoiseReport(
            std=max(std, lower),
            std_lower=lower,
            source="calibrated",
            temperature_c=temperature_c,
            exposure_us=self.exposure_us,
            details={
                "signal_e": phi,
                "anchor_e": a2,
                "dark_e": dark,
                "read_noise_e": cal.read_noise_e.value,
                "anchor_read_e_lower": self.anchor_read_lower_e(temperature_c)[0],
                "bound_level": 0.9,
                "calibrated_at_c": below.temperature_c,
                "calibrated_above_c": above.temperature_c,
            },
        )

    def readout(self, temperature_c: float) -> dict[str, float]:
        """Point estimates that turn raw DN into this model's output units at ``temperature_c``
        (black level, gain, mean dark electrons, signal and anchor electrons): for a device that
        reconstructs its outputs from raw frames itself (the LightOn backend)."""
        phi, _ = self._electrons("signal")
        a2, _ = self._electrons("anchor")
        cal = self.calibration
        return {
            "black_level_dn": cal.black_level_dn.value,
            "gain_e_per_dn": cal.gain_e_per_dn.value,
            "dark_e": self.dark_e(temperature_c),
            "signal_e": phi,
            "anchor_e": a2,
        }


def calibrated_noise(calibration: Calibration, path: Path, profile) -> CalibratedNoise:
    """``calibration`` as the noise model of a device of ``profile``, checked against the profile's
    identity: at the profile's exposure (or the first calibrated one) and powers (or the calibrated ones)."""
    check_profile(calibration, profile, path)
    exposure = getattr(profile, "exposure_us", None) or calibration.exposures_us[0]
    laser = getattr(profile, "laser_power_uw", None) or calibration.laser_power_uw or 0.0
    anchor = getattr(profile, "anchor_power_uw", None) or calibration.anchor_power_uw or 0.0
    return CalibratedNoise(calibration, path, profile.mode, exposure, laser, anchor)


def load_calibrated_noise(source: str | os.PathLike[str] | Calibration, profile) -> CalibratedNoise:
    """The noise model of ``source`` (a calibration file, relative paths against the working
    directory, or a :class:`Calibration` already read) for a device of ``profile``."""
    if isinstance(source, Calibration):
        return calibrated_noise(source, Path("<calibration>"), profile)
    path = Path(source).expanduser().resolve()
    return calibrated_noise(read_calibration(path), path, profile)
