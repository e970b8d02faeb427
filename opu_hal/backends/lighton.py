"""``backend = "lighton"``: the real OPU through LightOn's SDK ``lightonml`` (1.4.3).

The SDK is imported lazily: without it, building a device raises :class:`DeviceUnavailable`
saying how to install it. ``OPU.fit1d`` runs once (at :meth:`open`) for ``in_features``;
``linear_transform`` serves linear mode and ``transform`` intensity mode. Every transform is
retried with bounded exponential backoff and a per-call timeout; a call either returns the whole
batch or raises, never a partial batch. Every SDK call (``open``/``fit1d``, transforms, ``close``)
goes through one :class:`~opu_hal.backends.lighton_calls.SdkCaller` per device: one call at a
time, typed errors for a busy OPU, a timeout, invalid rows and host memory.
"""

from __future__ import annotations

import glob
import importlib
import math
import warnings
from typing import Any

import numpy as np
import torch

from ..contract.calibration import NoiseCalibration
from ..contract.capabilities import Capabilities
from ..contract.device import Device
from ..contract.errors import CalibrationError, DeviceUnavailable, ProfileError
from ..contract.frames import RawFrames
from ..contract.noise import DigitizedReadLaw, NoiseReport, PrivacyCounts, Projection
from ..contract.profile_base import CAMERA_PIXELS, DMD_MIRRORS
from ..randomness.seeding import stream_seed
from ..runtime.memory import available_bytes, check_rows_fit, gib
from .lighton_calls import SdkCaller, check_output
from .lighton_frames import calibrated_intensity, holographic_linear, raw_frames
from .lighton_noise import no_privacy_reads
from .lighton_profile import LightonProfile

INSTALL_HINT = (
    "install the SDK with `pip install --no-deps lightonml==1.4.3` next to numexpr, attrs, requests "
    "and setuptools<81 "
    "(scripts/setup.sh does this; lightonml pins numexpr==2.7.*, which does not build on Python 3.11)"
)
LIGHTON_CONFIG_GLOB = "/etc/lighton/*.json"


def import_sdk() -> Any:
    """The ``lightonml`` module, or :class:`DeviceUnavailable` with the install command."""
    try:
        with warnings.catch_warnings():  # lightonml 1.4.3 imports the deprecated pkg_resources
            warnings.filterwarnings("ignore", message="pkg_resources is deprecated")
            return importlib.import_module("lightonml")
    except ImportError as exc:
        raise DeviceUnavailable(f"lightonml is not importable ({exc}); {INSTALL_HINT}") from None


def check_hardware_present() -> None:
    """Refuse early, with what to do, when this host has no OPU configuration or driver."""
    if not glob.glob(LIGHTON_CONFIG_GLOB):
        raise DeviceUnavailable(
            f"no OPU on this host: no configuration file matches {LIGHTON_CONFIG_GLOB} "
            "(an OPU host has one from LightOn's installation); use a profile with "
            "simulated = true, or run on a machine with a LightOn OPU"
        )
    try:
        importlib.import_module("lightonopu")
    except ImportError:
        raise DeviceUnavailable(
            "the OPU driver package lightonopu is missing: install it from LightOn's "
            "repository on the OPU host (`pip install lightonml[drivers]`)"
        ) from None


PEAK_FACTOR = 4  # float32 copies of a row's input and output at the projection's peak
# lightonml's simulated device draws its complex64 matrix as two float64 normal arrays cast to
# float32, then combines them: about 32 bytes per entry at the peak.
SIMULATED_MATRIX_BYTES_PER_ENTRY = 32


def check_simulated_matrix_fits(profile: LightonProfile) -> None:
    """Refuse, before lightonml allocates it, a simulated matrix larger than half the memory left."""
    need = SIMULATED_MATRIX_BYTES_PER_ENTRY * profile.in_features * profile.out_features
    if need > available_bytes() // 2:
        raise ProfileError(
            f"profile {profile.label!r}: keys 'in_features' x 'out_features' = {profile.in_features} x "
            f"{profile.out_features} need about {gib(need)} for lightonml's simulated matrix; {gib(available_bytes())} "
            "is available (half of it may be used): use smaller sizes"
        )


class LightonDevice(Device[LightonProfile]):
    """LightOn OPU (hardware, or the SDK's simulated device) behind the device contract."""

    def __init__(self, profile: LightonProfile, opu_device: Any = None) -> None:
        super().__init__(profile)
        self._sdk = import_sdk()
        if not profile.simulated and opu_device is None:
            check_hardware_present()
        if profile.simulated and opu_device is None:
            check_simulated_matrix_fits(profile)
        self._opu_device = opu_device
        self._noise_std = profile.noise_std
        self._opu: Any = None
        self._noise_generator = torch.Generator().manual_seed(stream_seed(profile.seed, "noise"))
        self.attempts = 0
        self._calls = SdkCaller(retries=profile.retries, timeout_s=profile.timeout_s, backoff_s=profile.backoff_s)

    def _check_memory(self, rows: int) -> None:
        check_rows_fit(rows, self.in_features, self.out_features, PEAK_FACTOR, self._profile.label)

    def _describe(self) -> Capabilities:
        p = self._profile
        settable: dict[str, tuple[float, float, str]] = {}
        if p.simulated:
            settable["noise_std"] = (0.0, math.inf, "output units")
        if p.temperature_c is not None:  # declared, not settable: the range is that point
            settable["temperature_c"] = (p.temperature_c, p.temperature_c, "C")
        return Capabilities(
            input_kind="binary",
            output_kind=p.mode,
            max_in_features=DMD_MIRRORS,
            max_out_features=CAMERA_PIXELS,
            settable=settable,
            raw_frames=p.laser_power_uw is not None,
            calibratable=True,
        )

    def _apply_options(self, options: dict[str, float]) -> None:
        self._noise_std = options.get("noise_std", self._noise_std)  # temperature_c: the declared point

    @property
    def opu(self) -> Any:
        """The SDK's ``lightonml.OPU`` once the device is open (``None`` before), for inspection."""
        return self._opu

    @property
    def calibrated(self) -> bool:
        return self._calibration is not None

    def digitized_read_law(self) -> DigitizedReadLaw:
        """Refused (:func:`.lighton_noise.no_privacy_reads`): a profile's keys are not a measurement, and
        lightonml gives no anchor-only reads; a recorded calibration is planned without the device."""
        raise no_privacy_reads(self._profile, self._calibration is not None)

    def draw_privacy_counts(self, n_values: int, poisson_mean: float) -> PrivacyCounts:
        """Refused, naming why (:func:`.lighton_noise.no_privacy_reads`)."""
        raise no_privacy_reads(self._profile, self._calibration is not None)

    @property
    def temperature_c(self) -> float | None:
        """The camera temperature the profile declares (lightonml 1.4.3 cannot read it)."""
        return self._profile.temperature_c

    def _use_calibration(self, calibration: NoiseCalibration) -> None:
        """Refuse a calibration that does not cover the declared temperature and exposure, one next
        to software noise, or one whose reconstruction this OPU cannot perform."""
        p = self._profile
        if p.temperature_c is None or p.exposure_us is None:
            self._calibration = None
            raise CalibrationError(
                f"profile {p.label!r}: a calibration needs the keys 'temperature_c' (the camera's operating "
                "temperature: lightonml 1.4.3 cannot read it) and 'exposure_us'"
            )
        if p.noise_std > 0:
            self._calibration = None
            raise CalibrationError(
                f"profile {p.label!r}: noise_std = {p.noise_std:g} adds software noise the "
                "calibration does not describe; set noise_std = 0 with a calibration"
            )
        if not callable(getattr(calibration, "readout", None)):
            self._calibration = None
            raise CalibrationError(
                f"profile {p.label!r}: this calibration ({type(calibration).__name__}) gives no "
                "readout (black level, gain, electrons) to read raw frames with"
            )
        try:
            calibration.check_operating_point(p.temperature_c, p.exposure_us)
        except CalibrationError:
            self._calibration = None
            raise
        if p.mode == "linear" and p.anchor_power_uw is None:
            self._calibration = None
            raise CalibrationError(
                f"profile {p.label!r}: a calibrated linear projection is read holographically with a reference "
                "beam (anchor_power_uw); lightonml's linear_transform reconstructs with DMD anchors inside "
                'lightonopu, whose frames and units are not exposed: use mode = "intensity" or an OPU with a '
                "reference beam"
            )

    def raw_frames(
        self,
        illumination: str,
        n_frames: int,
        *,
        exposure_us: float | None = None,
        anchor_power_uw: float | None = None,
        pattern: torch.Tensor | None = None,
    ) -> RawFrames:
        """Raw camera frames in DN through lightonml (:mod:`.lighton_frames`: what the SDK offers)."""
        if not self.capabilities.raw_frames:
            return super().raw_frames(illumination, n_frames, exposure_us=exposure_us)
        self.open()
        return self._calls.call(
            lambda: raw_frames(
                self._opu,
                self._profile,
                illumination,
                n_frames,
                exposure_us=exposure_us,
                anchor_power_uw=anchor_power_uw,
                pattern=pattern,
            ),
            f"raw {illumination} frames",
            retries=0,
        )

    def noise_report(self) -> NoiseReport:
        """Calibrated noise at the declared temperature; else software noise (simulated) or zero."""
        p = self._profile
        if self._calibration is not None:
            return self._calibration.report(p.declared("temperature_c"))
        if p.simulated:
            return NoiseReport(
                std=self._noise_std, std_lower=self._noise_std, source="software", exposure_us=p.exposure_us
            )
        return NoiseReport(
            std=0.0, std_lower=0.0, source="declared", exposure_us=p.exposure_us, details={"uncalibrated": 1.0}
        )

    def _acquire(self) -> None:
        p = self._profile
        device = self._opu_device
        if device is None and p.simulated:
            kwargs = {
                k: int(v)
                for k, v in (("exposure_us", p.exposure_us), ("frametime_us", p.frametime_us))
                if v is not None
            }
            device = self._sdk.internal.simulated_device.SimulatedOpuDevice(linear=p.mode == "linear", **kwargs)
        override = {}
        if not p.simulated and device is None:
            if p.exposure_us is not None:
                override["output"] = {"exposure_us": p.exposure_us}
            if p.frametime_us is not None:
                override["input"] = {"frametime_us": p.frametime_us}
        try:
            opu = self._sdk.OPU(
                n_components=p.out_features,
                opu_device=device,
                max_n_features=p.in_features,
                config_override=override or None,
                rescale=p.rescale,
                disable_pbar=True,
                open_at_init=False,
            )
            if hasattr(opu.device, "build_random_matrix"):
                opu.device.build_random_matrix(
                    p.in_features, p.out_features, seed=stream_seed(p.seed, "matrix") % 2**32
                )
        except (RuntimeError, OSError, ImportError, ValueError) as exc:
            raise DeviceUnavailable(f"could not create the OPU through lightonml: {exc}") from None

        def open_and_fit() -> None:
            opu.open()
            opu.fit1d(n_features=p.in_features)

        self._opu = opu  # held from here on, so a failed open is still closed
        try:
            self._calls.call(open_and_fit, "opening the OPU (open, fit1d)")
        except Exception:
            self._close_quietly()
            raise

    def _close_quietly(self) -> None:
        try:
            self._release()
        except Exception:
            pass

    def _release(self) -> None:
        """Close the SDK's OPU once (after any abandoned call has left the SDK, else
        :class:`DeviceTimeout`); the device counts as closed even when closing fails."""
        opu, self._opu = self._opu, None
        if opu is None:
            return
        self._calls.call(opu.close, "closing the OPU", retries=0)

    def _transform(self, batch: np.ndarray) -> np.ndarray:
        self.attempts += 1
        p = self._profile
        if self._calibration is not None:  # raw frames read in the calibrated model's units
            readout = self._calibration.readout(p.declared("temperature_c"))  # type: ignore[attr-defined]
            read = holographic_linear if p.mode == "linear" else calibrated_intensity
            output = read(self._opu, p, batch, readout)
        else:
            method = self._opu.linear_transform if p.mode == "linear" else self._opu.transform
            output = np.asarray(method(batch), dtype=np.float32)
        if output.shape != (batch.shape[0], self.out_features):
            raise RuntimeError(f"OPU returned shape {output.shape}, expected {(batch.shape[0], self.out_features)}")
        check_output(output, batch)
        return output

    def _project(self, x: torch.Tensor) -> Projection:
        batch = x.detach().cpu().numpy().astype(np.uint8)
        p = self._profile
        output = self._calls.call(lambda: self._transform(batch), "OPU transform")
        values = torch.from_numpy(output.copy())
        report = self.noise_report()
        if p.simulated and self._noise_std > 0 and self._calibration is None:
            values += self._noise_std * torch.randn(values.shape, generator=self._noise_generator)
        return Projection(values=values, noise=report)
