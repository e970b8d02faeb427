"""One calibration: acquire (:mod:`.frames`), estimate (:mod:`.photon_transfer`,
:mod:`.temperature`), and assemble the file's model (:mod:`.schema`)."""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Sequence

import numpy as np

from ..contract.errors import CalibrationError
from ..contract.version import __version__
from .bootstrap import percentile_estimate
from .dark_lines import HOT_PIXEL_MADS, dark_ceiling_dn, dark_line, hot_threshold_dn_per_us, usable_exposures
from .frames import Acquisition, Progress, acquire
from .photon_transfer import (
    PhotonTransfer,
    estimate,
    worst_pixel_lower,
    worst_pixel_upper,
)
from .schema import (
    Calibration,
    DarkCurrentPoint,
    DeviceIdentity,
    OperatingPointCalibration,
)
from .temperature import fit_temperature_law

DEFAULT_FRAMES = 32
DEFAULT_BOOTSTRAP = 400


# Profile keys that are no part of the camera's physics: names, sizes and seed (compared on their
# own), the operating point (temperature, exposure, laser and anchor power: a calibration covers a
# range of them and is rescaled to the powers), and where or how the computation runs.
NOT_PHYSICS = frozenset(
    {
        "backend",
        "name",
        "description",
        "calibration",
        "seed",
        "in_features",
        "out_features",
        "mode",
        "temperature_c",
        "temperature_min_c",
        "temperature_max_c",
        "exposure_us",
        "laser_power_uw",
        "anchor_power_uw",
        "block_mb",
        "cache_mb",
        "compute",
        "retries",
        "timeout_s",
        "backoff_s",
        "speckle_band",  # which calibrated pixels the digitized counts keep: a choice, not the camera
    }
)


def physics_of(profile) -> dict[str, object]:
    """Every key of ``profile`` that shapes what its camera measures (gain, read noise, quantum
    efficiency, dark current, ADC, ...): a calibration holds only for the same values."""
    return {key: value for key, value in profile.model_dump().items() if key not in NOT_PHYSICS}


def profile_identity(profile, mode: str, serial: str | None = None) -> DeviceIdentity:
    """What a calibration is tied to: backend, profile label, SDK serial (if any), matrix seed,
    sizes, output mode and every physics key of the profile."""
    return DeviceIdentity(
        backend=profile.backend,
        profile=profile.label,
        serial=serial,
        seed=profile.seed,
        in_features=profile.in_features,
        out_features=profile.out_features,
        mode=mode,
        physics=physics_of(profile),
    )


def device_identity(device) -> DeviceIdentity:
    """The identity of an open device (its serial, if the SDK gives one, and its output kind)."""
    return profile_identity(device.profile, device.capabilities.output_kind, getattr(device, "serial", None))


def calibrate_device(
    device,
    temperatures: Sequence[float],
    exposures: Sequence[float],
    dark_exposures: Sequence[float] = (),
    frames: int = DEFAULT_FRAMES,
    *,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
    progress: Progress | None = None,
) -> Calibration:
    """Measure ``device`` over the grid and return its calibration (device left at ``temperatures[0]``)."""
    acq = acquire(device, temperatures, exposures, dark_exposures, frames, progress)
    pt = estimate(acq, bootstrap=bootstrap, seed=seed)
    return assemble(device, acq, pt, temperatures, exposures, dark_exposures)


def assemble(device, acq: Acquisition, pt: PhotonTransfer, temperatures, exposures, dark_exposures) -> Calibration:
    """The calibration model from the acquisition and the photon-transfer estimates."""
    profile = device.profile
    return assemble_measured(
        device_identity(device),
        (getattr(profile, "pixel_pitch_um", None), getattr(profile, "laser_power_uw", None)),
        getattr(profile, "anchor_power_uw", None),
        acq,
        pt,
        temperatures,
        exposures,
        dark_exposures,
    )


def assemble_measured(
    identity: DeviceIdentity,
    pitch_and_laser: tuple[float | None, float | None],
    anchor_power_uw: float | None,
    acq: Acquisition,
    pt: PhotonTransfer,
    temperatures,
    exposures,
    dark_exposures,
) -> Calibration:
    """The calibration model of the camera ``identity`` names (pixel pitch in um, laser and anchor power
    in uW where known) from the acquisition and the photon-transfer estimates."""
    alpha = pt.alpha
    temps = [float(t) for t in temperatures]
    points, dark_points, rate_values, rate_draws, censored = _per_temperature(acq, pt, temps, exposures)
    pitch, laser_power_uw = pitch_and_laser
    law = None
    if pitch is not None and len(temps) >= 1:
        law = fit_temperature_law(
            np.array(temps),
            np.array(rate_values),
            np.stack(rate_draws, axis=-1),
            (pitch * 1e-4) ** 2,
            alpha,
            censored=np.array(censored),
        )
    reference = acq.ptc[0]
    photons_per_uw = (
        reference.photons_per_pixel / reference.anchor_power_uw
        if reference.photons_per_pixel and reference.anchor_power_uw
        else None
    )
    notes = _notes(pt, acq, temps)
    return Calibration(
        device=identity,
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        software_version=_software_version(),
        frames_per_series=acq.ptc_dark.frames,
        frames_total=acq.frames_total,
        pixels=acq.pixels,
        temperatures_c=temps,
        exposures_us=[float(e) for e in exposures],
        dark_exposures_us=[float(e) for e in dark_exposures],
        gain_e_per_dn=pt.gain,
        read_noise_e=pt.read_noise,
        read_noise_e_min_pixel_lower=pt.read_noise_min_pixel_lower,
        black_level_dn=pt.black,
        saturation_e=pt.saturation,
        saturation_limited_by=pt.saturation_limited_by,
        saturation_point_e=pt.saturation_point,
        illumination_levels=pt.levels,
        linearity=pt.linearity,
        uniformity=pt.uniformity,
        defect_pixels=pt.defects,
        quantum_efficiency=pt.quantum_efficiency,
        photons_per_pixel_per_uw=photons_per_uw,
        laser_power_uw=laser_power_uw,
        anchor_power_uw=anchor_power_uw,
        dark_current=dark_points,
        temperature_law=law,
        operating_points=points,
        photon_transfer_curve=pt.curve or None,
        notes=notes,
    )


def _per_temperature(
    acq: Acquisition, pt: PhotonTransfer, temps: list[float], exposures: Sequence[float]
) -> tuple[list[OperatingPointCalibration], list[DarkCurrentPoint], list[float], list[np.ndarray], list[float]]:
    """At each temperature: the operating points, the typical pixels' dark-current rate (value, bootstrap
    draws) and the share of pixels whose dark line is censored (fewer than two usable exposures)."""
    alpha, index = pt.alpha, pt.index
    g, g_draws = pt.gain.value, pt.gain_draws
    g_low, g_high = (float(q) for q in np.quantile(g_draws, [alpha / 2, 1 - alpha / 2]))
    typical = ~pt.hot_pixels  # the temperature law describes the typical pixels (hot ones counted apart)
    points, dark_points, rate_values, rate_draws, censored = [], [], [], [], []
    typical_index = np.random.default_rng(1).integers(0, int(typical.sum()), size=index.shape)
    ceiling = dark_ceiling_dn(acq)
    for celsius in temps:
        darks = sorted((s for s in acq.dark if s.temperature_c == celsius), key=lambda s: s.exposure_us)
        black, all_slope, black_draws, all_draws = dark_line(darks, index, ceiling, pt.black.value)
        _, typical_slope, _, typical_draws = dark_line(
            [dataclasses.replace(d, mean=d.mean[typical], var=d.var[typical]) for d in darks],
            typical_index,
            ceiling,
            pt.black.value,
        )
        rate, draws = typical_slope * 1e6 * g, typical_draws * 1e6 * g_draws
        censored.append(float((usable_exposures(darks, ceiling)[typical] < 2).mean()))  # no line: rate unmeasured
        rate_values.append(rate)
        rate_draws.append(draws)
        threshold = hot_threshold_dn_per_us(darks, ceiling) * 1e6 * g
        dark_points.append(
            DarkCurrentPoint(
                temperature_c=celsius,
                rate_e_per_s=percentile_estimate(rate, draws, alpha, "e-/s"),
                hot_pixels=int(pt.hot_pixels.sum()),
                rate_all_pixels_e_per_s=percentile_estimate(
                    all_slope * 1e6 * g, all_draws * 1e6 * g_draws, alpha, "e-/s"
                ),
                hot_threshold_e_per_s=threshold if np.isfinite(threshold) else None,
                hot_threshold_mads=HOT_PIXEL_MADS,
            )
        )
        for exposure in exposures:
            points.append(_operating_point(acq, darks, celsius, float(exposure), pt, black, black_draws, g_low, g_high))
    return points, dark_points, rate_values, rate_draws, censored


def _operating_point(
    acq: Acquisition,
    darks: list,
    celsius: float,
    exposure: float,
    pt: PhotonTransfer,
    black: float,
    black_draws: np.ndarray,
    g_low: float,
    g_high: float,
) -> OperatingPointCalibration:
    """Dark and anchor signal at one operating point: means with bootstrap intervals, and the
    worst-pixel bounds (over every pixel) at the gain's interval ends."""
    alpha, index, g, g_draws = pt.alpha, pt.index, pt.gain.value, pt.gain_draws
    dark = next(s for s in darks if s.exposure_us == exposure)
    anchor = next(s for s in acq.anchor if s.temperature_c == celsius and s.exposure_us == exposure)
    dark_e = (dark.mean.mean() - black) * g
    dark_draws = (dark.mean[index].mean(1) - black_draws) * g_draws
    anchor_e = (anchor.mean - dark.mean).mean() * g
    anchor_draws = (anchor.mean - dark.mean)[index].mean(1) * g_draws
    return OperatingPointCalibration(
        temperature_c=celsius,
        exposure_us=exposure,
        frames=dark.frames,
        dark_e=percentile_estimate(dark_e, dark_draws, alpha, "e-"),
        dark_e_min_pixel_lower=worst_pixel_lower(dark.mean - black, dark.var, dark.frames, g_low, alpha),
        anchor_e=percentile_estimate(anchor_e, anchor_draws, alpha, "e-"),
        anchor_read_e_min_pixel_lower=worst_pixel_lower(anchor.mean - black, anchor.var, anchor.frames, g_low, alpha),
        anchor_e_min_pixel_lower=worst_pixel_lower(
            anchor.mean - dark.mean, anchor.var + dark.var, anchor.frames, g_low, alpha
        ),
        anchor_e_max_pixel_upper=worst_pixel_upper(
            anchor.mean - dark.mean, anchor.var + dark.var, anchor.frames, g_high, alpha
        ),
        anchor_power_uw=float(anchor.anchor_power_uw or 0.0),
        clipped_reads=anchor.clipped + dark.clipped,
    )


def _notes(pt: PhotonTransfer, acq: Acquisition, temps: list[float]) -> list[str]:
    """What the calibration file says about what was identifiable, assumed or biased."""
    notes = [
        "gain, read noise, dark signal, saturation: identifiable from frames alone (photon transfer)",
        "quantum efficiency: identifiable only because the device knows the power at the sensor; it "
        "absorbs any error of that power figure"
        if pt.quantum_efficiency
        else "quantum efficiency: not identifiable (no known illumination)",
        f"saturation is limited by the {'ADC range: the full well is not identifiable' if pt.saturation_limited_by == 'adc' else 'full well'}",
        f"{int(pt.hot_pixels.sum())} hot pixel(s) left out of the read-noise estimate; worst-pixel lower "
        "bounds cover every pixel (DSNU, hot pixels) and assume a uniform black level",
        "temperature law fitted on the typical pixels' mean dark current (hot pixels left out); gain assumed "
        "temperature-independent "
        "(measured at the first temperature)",
    ]
    if pt.dark_noise_dn < 0.5:
        notes.append(
            f"dark noise {pt.dark_noise_dn:.2f} DN is below half an ADC step: rounding is not dithered, so "
            "read noise (interval widened to start at 0), small dark signals and the gain are biased; "
            "calibrate in a camera mode with more bits or more analog gain"
        )
    if len(temps) < 2:
        notes.append("one temperature: no activation energy or doubling temperature")
    clipped = sum(s.clipped for s in acq.dark)
    if clipped:
        notes.append(f"{clipped} dark reads clipped (hot pixels or long exposures): dark fit biased low")
    return notes


def _software_version() -> str:
    return f"opu-hal {__version__}"


__all__ = ["DEFAULT_FRAMES", "CalibrationError", "calibrate_device", "device_identity"]
