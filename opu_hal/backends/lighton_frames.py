"""Raw camera frames of a LightOn OPU through ``lightonml`` (1.4.3), for calibration (issue 36).

What the SDK offers, read from its source (``lightonml/opu.py``, ``internal/runner.py``,
``internal/settings.py``, ``internal/inspect.py``, ``context.py``):

- raw intensity frames: ``OPU.transform`` is the OPU's native operation; on hardware it returns
  the camera's output region in DN (``device.output_dtype``, ``uint8`` on LightOn's 8-bit cameras;
  ``lightonml.internal.inspect`` treats values outside [0, 255] as "not the output of an OPU"),
  with no post-processing (no rescaling, no decoding), cut to ``n_components``;
- exposure: a transform-setting override, ``OPU.fit1d(..., exposure_us=...)`` (integer
  microseconds, applied to ``device.exposure_us`` by ``TransformRunner._adjust_exposure``); the
  exposure used comes back in the output's ``context.exposure_us``;
- nothing else a calibration needs: no laser switch, no reference beam (``linear_transform``
  reconstructs with anchor patterns on the DMD, inside the closed ``lightonopu.linear_reconstruction``),
  no camera or OPU temperature, no analog gain setting (``gain_dB`` is read-only).

So dark frames (laser off) and anchor frames (the reference beam alone) need two controls on the
SDK's device object (the ``opu_device`` seam) that lightonml 1.4.3's own devices do not have:
``laser_on`` (bool) and ``reference_power_uw`` (the reference beam's power at the sensor, 0 = off).
A device without them is refused for those illuminations, with this reason; signal frames (a DMD
pattern's speckle) need neither. Dark frames are never faked with a blank DMD: with the laser on,
stray light would enter the dark signal, and the noise floor's lower bound would be too high.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ..contract.errors import DeviceUnavailable, InputError
from ..contract.frames import ILLUMINATIONS, RawFrames
from .lighton_profile import LightonProfile

PLANCK_J_S = 6.62607015e-34
LIGHT_SPEED_M_S = 299_792_458.0
LASER_SWITCH = "laser_on"
REFERENCE_BEAM = "reference_power_uw"
SDK_LACKS = (
    "lightonml 1.4.3 offers no laser switch, no reference beam and no temperature read; its "
    "OPU device (the opu_device seam) would need a '{attr}' attribute"
)


def photons_per_pixel(power_uw: float, profile: LightonProfile, exposure_us: float) -> float:
    """Mean photons per pixel per exposure for ``power_uw`` spread over ``sensor_pixels``."""
    photon_energy_j = PLANCK_J_S * LIGHT_SPEED_M_S / (profile.wavelength_nm * 1e-9)
    return power_uw * 1e-6 * exposure_us * 1e-6 / photon_energy_j / profile.sensor_pixels


def camera_max_dn(sdk_device: Any) -> int:
    """The top of the camera's ADC range from the SDK's output type; a device whose output is not
    integer DN (lightonml's simulated device returns noiseless float32 values) has no camera."""
    dtype = np.dtype(sdk_device.output_dtype)
    if not np.issubdtype(dtype, np.integer):
        raise DeviceUnavailable(
            f"the SDK device {type(sdk_device).__name__} returns {dtype} values, not camera DN: it has no camera "
            "to calibrate (lightonml's simulated device is noiseless); calibrate a LightOn OPU, or a device at the "
            "opu_device seam whose output_dtype is an integer type"
        )
    return int(np.iinfo(dtype).max)


def require_control(sdk_device: Any, attr: str, illumination: str) -> None:
    """Refuse an illumination the SDK device cannot produce, saying what is missing."""
    if not hasattr(sdk_device, attr):
        what = {
            "dark": "dark frames need the laser off",
            "anchor": "anchor frames need the reference beam alone",
            "reference": "a calibrated linear projection needs a reference beam (holographic read)",
        }[illumination]
        raise DeviceUnavailable(
            f"{what}, which this OPU ({type(sdk_device).__name__}) cannot produce: " + SDK_LACKS.format(attr=attr)
        )


def transform_at(opu: Any, batch: np.ndarray, exposure_us: float, n_features: int) -> tuple[np.ndarray, float]:
    """``OPU.transform`` of a binary ``batch`` at ``exposure_us`` (the SDK's transform-setting
    override), then the profile's exposure restored; returns the raw output and the exposure the
    SDK reports it used."""
    exposure = int(round(exposure_us))
    try:
        opu.fit1d(n_features=n_features, exposure_us=exposure)
        output = opu.transform(batch)
    finally:
        opu.fit1d(n_features=n_features)
    used = getattr(getattr(output, "context", None), "exposure_us", None)
    return np.asarray(output), float(exposure if used is None else used)


def set_illumination(sdk_device: Any, *, laser: bool, reference_uw: float) -> None:
    """Switch the laser and the reference beam (controls checked by :func:`require_control`)."""
    if hasattr(sdk_device, LASER_SWITCH):
        setattr(sdk_device, LASER_SWITCH, laser)
    if hasattr(sdk_device, REFERENCE_BEAM):
        setattr(sdk_device, REFERENCE_BEAM, float(reference_uw))


def raw_frames(
    opu: Any,
    profile: LightonProfile,
    illumination: str,
    n_frames: int,
    *,
    exposure_us: float | None = None,
    anchor_power_uw: float | None = None,
    pattern: torch.Tensor | None = None,
) -> RawFrames:
    """``n_frames`` raw frames in DN of one ``illumination`` at the declared temperature."""
    if illumination not in ILLUMINATIONS:
        raise InputError(f"illumination {illumination!r}; allowed: {', '.join(ILLUMINATIONS)}")
    if not (isinstance(n_frames, int) and n_frames >= 1):
        raise InputError(f"n_frames must be an integer >= 1, got {n_frames!r}")
    exposure = profile.exposure_us if exposure_us is None else float(exposure_us)
    if exposure is None or not (math.isfinite(exposure) and 1 <= exposure <= 1e7):
        raise InputError(f"exposure_us {exposure} is outside [1, 1e7] us (lightonml takes whole microseconds)")
    device, n_in = opu.device, profile.in_features
    max_dn = camera_max_dn(device)
    rows = np.zeros((n_frames, n_in), dtype=np.uint8)
    photons: float | None = 0.0
    power, laser, reference = 0.0, True, 0.0
    if illumination == "dark":
        require_control(device, LASER_SWITCH, "dark")
        laser = False
    elif illumination == "anchor":
        require_control(device, REFERENCE_BEAM, "anchor")
        if profile.anchor_power_uw is None:
            raise DeviceUnavailable(
                f"profile {profile.label!r} declares no anchor_power_uw: an OPU without a "
                "reference beam has no anchor frames"
            )
        power = profile.anchor_power_uw if anchor_power_uw is None else float(anchor_power_uw)
        if not (math.isfinite(power) and 0 <= power <= 1e6):
            raise InputError(f"anchor_power_uw {power} is outside [0, 1e6] uW")
        reference = power
    else:
        if pattern is None or tuple(pattern.shape) != (n_in,):
            raise InputError(f"illumination 'signal' needs a pattern of shape ({n_in},)")
        rows[:] = pattern.detach().cpu().numpy().astype(np.uint8)
        power, photons = float(profile.laser_power_uw or 0.0), None
    try:
        set_illumination(device, laser=laser, reference_uw=reference)
        dn, used = transform_at(opu, rows, exposure, n_in)
    finally:
        set_illumination(device, laser=True, reference_uw=0.0)
    if photons is not None:
        photons = photons_per_pixel(power, profile, used)
    dn = np.asarray(dn)
    return RawFrames(
        dn=torch.from_numpy(dn.astype(np.int64)),
        illumination=illumination,
        temperature_c=profile.declared("temperature_c"),
        exposure_us=used,
        photons_per_pixel=photons,
        clipped=int((dn >= max_dn).sum()),
        power_uw=float(power),
        max_dn=max_dn,
    )


def holographic_linear(opu: Any, profile: LightonProfile, batch: np.ndarray, readout: dict[str, float]) -> np.ndarray:
    """Linear projections from three raw frames per row, as the simulated OPU and the calibrated
    noise model do (:mod:`opu_hal.camera.physics`): ``e_1`` of ``|z + a|^2`` (reference on),
    ``e_2`` of ``|z|^2`` and ``e_3`` of the reference alone, each ``(DN - black) g - D`` with the
    calibration's point estimates; the value is ``(e_1 - e_2 - e_3) sqrt(2 / Phi) / (2 A)``."""
    device, n_in = opu.device, profile.in_features
    require_control(device, REFERENCE_BEAM, "reference")
    exposure = profile.declared("exposure_us")
    power = profile.declared("anchor_power_uw")
    try:
        set_illumination(device, laser=True, reference_uw=power)
        with_reference, _ = transform_at(opu, batch, exposure, n_in)
        reference_alone, _ = transform_at(opu, np.zeros_like(batch), exposure, n_in)
        set_illumination(device, laser=True, reference_uw=0.0)
        signal_alone, _ = transform_at(opu, batch, exposure, n_in)
    finally:
        set_illumination(device, laser=True, reference_uw=0.0)
    black, gain, dark = readout["black_level_dn"], readout["gain_e_per_dn"], readout["dark_e"]
    difference = (with_reference.astype(np.float64) - signal_alone - reference_alone + black) * gain + dark
    scale = math.sqrt(2 / readout["signal_e"]) / (2 * math.sqrt(readout["anchor_e"]))
    return (difference * scale).astype(np.float32)


def calibrated_intensity(opu: Any, profile: LightonProfile, batch: np.ndarray, readout: dict[str, float]) -> np.ndarray:
    """Intensity projections from one raw frame per row in the calibrated model's units:
    ``((DN - black) g - D) / Phi``."""
    dn, _ = transform_at(opu, batch, profile.declared("exposure_us"), profile.in_features)
    electrons = (dn.astype(np.float64) - readout["black_level_dn"]) * readout["gain_e_per_dn"] - readout["dark_e"]
    return (electrons / readout["signal_e"]).astype(np.float32)
