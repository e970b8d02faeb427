"""The ``simulated`` backend's profile model and its :class:`~opu_hal.profiles.registry.BackendSpec`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ...camera.datasheet import CMV2000
from ...contract.backend_spec import BackendSpec
from ...contract.profile_base import CAMERA_PIXELS, DEFAULT_CHECK_EVERY, DMD_MIRRORS, BaseProfile


class SimulatedProfile(BaseProfile):
    """``backend = "simulated"``: the physics model of an OPU (optics, camera, temperature).

    Defaults describe a LightOn-like device: 912x1140 DMD, 8-bit camera of 2040x1088 pixels with
    5.5 um pitch, 400 us exposure, 532 nm laser. Units are in the key names.
    """

    backend: Literal["simulated"]
    in_features: int = Field(ge=1, le=DMD_MIRRORS, description="DMD micromirrors used")
    out_features: int = Field(ge=1, le=CAMERA_PIXELS, description="camera pixels read")
    mode: Literal["linear", "intensity"] = Field(
        "linear", description="'linear': B x from three intensity frames; 'intensity': |B x|^2"
    )
    temperature_c: float = Field(25.0, description="sensor temperature at start, Celsius")
    temperature_min_c: float = Field(-10.0, ge=-60.0, le=150.0, description="lowest settable, Celsius")
    temperature_max_c: float = Field(85.0, ge=-60.0, le=150.0, description="highest settable, Celsius")
    exposure_us: float = Field(400.0, ge=1.0, le=1e7, description="exposure time per frame, us")
    laser_power_uw: float = Field(
        0.7, ge=1e-6, le=1e6, description="signal power reaching the sensor with every mirror on, uW"
    )
    anchor_power_uw: float = Field(0.7, ge=1e-6, le=1e6, description="reference (anchor) power reaching the sensor, uW")
    wavelength_nm: float = Field(532.0, ge=200.0, le=2000.0, description="laser wavelength, nm")
    quantum_efficiency: float = Field(0.6, ge=1e-3, le=1.0, description="electrons per photon")
    sensor_pixels: int = Field(
        CAMERA_PIXELS, ge=1, le=2**26, description="pixels the speckle spreads over (power is shared)"
    )
    pixel_pitch_um: float = Field(5.5, ge=0.5, le=100.0, description="pixel pitch, um")
    # None: the full-frame period of the cited camera at adc_bits (opu_hal/camera/datasheet.py: CMOSIS
    # CMV2000, 340 fps at 10 bits, 70 fps at 12 bits); lightonml's 500 us is its simulated device's default.
    frame_time_us: float | None = Field(
        None, ge=1.0, le=1e8, description="camera frame period, us (None: the CMV2000 datasheet's at adc_bits)"
    )
    privacy_anchor: Literal["speckle", "reference-beam"] = Field(
        "speckle",
        description="privacy anchor light: 'speckle' (a DMD pattern through the medium, as LightOn OPUs have) "
        "or 'reference-beam' (a flat beam, only for hardware that has one)",
    )
    reference_field: Literal["speckle", "flat"] = Field(
        "speckle",
        description="linear mode's reference: 'speckle' (an anchor pattern through the medium, as LightOn OPUs "
        "have; each pixel divided by its own amplitude) or 'flat' (a uniform reference beam, only for hardware "
        "that has one)",
    )
    reference_band: list[float] | None = Field(
        None,
        min_length=2,
        max_length=2,
        description="speckle reference: read only pixels whose reference intensity over its mean lies in "
        "[low, high] (a dim reference is a noisy output, a bright one clips first and sets the noise bound); "
        "None: the pixels whose anchor-only frame dithers the ADC (every pixel at low gain; dither.py)",
    )
    dead_pixel_fraction: float = Field(0.0, ge=0.0, le=0.5, description="fraction of dead pixels (no response)")
    dim_pixel_fraction: float = Field(0.0, ge=0.0, le=0.5, description="fraction of dim pixels")
    dim_pixel_factor: float = Field(0.3, ge=0.0, le=1.0, description="response of a dim pixel over a typical one")
    speckle_max_overshoot: float = Field(
        1.3,
        ge=1.0,
        le=10.0,
        description="speckle anchor: largest planned count mean over the accounted one (pixel selection)",
    )
    speckle_band: float | None = Field(
        None,
        gt=1.0,
        le=100.0,
        description="speckle anchor, digitized counts: keep only the pixels whose bounds fit one band [t, band t] "
        "(the applied noise at most band times the accounted; more frames a draw); None: every pixel up to the "
        "clip ceiling, in bins",
    )
    anchor_check_every: int = Field(
        DEFAULT_CHECK_EVERY,
        ge=1,
        le=10**6,
        description="privacy draws between two re-reads of the speckle anchor (drift watch)",
    )
    # 0.043 nA/cm^2 = 125 e-/s at 25 C for a 7.4 um pixel, the dark current CMOSIS gives for its
    # 8T global-shutter pixel (CMV300 datasheet v2.10, http://dtsheet.com/model/4255221, the family
    # of the 5.5 um CMV2000 of LightOn-like cameras): 69 e-/s at 5.5 um. The Konnik-Welsh law then
    # doubles every 7.1 K at 0 C, 8.4 K at 25 C, 11.5 K at 80 C; "doubles every 5-8 C" is the
    # usual CMOS figure (A. Theuwissen, harvestimaging.com/blog/?m=200909).
    dark_fom_na_per_cm2: float = Field(
        0.043, ge=0.0, le=1e4, description="dark-current figure of merit at 300 K, nA/cm^2"
    )
    dsnu_rms: float = Field(0.0, ge=0.0, le=3.0, description="log-std of the per-pixel dark-current multiplier (DSNU)")
    dark_activation_ev: float | None = Field(
        None,
        ge=0.1,
        le=2.0,
        description="dark-current activation energy, eV (None: Konnik-Welsh, half "
        "the Varshni band gap; a number keeps the figure of merit as the rate at 300 K)",
    )
    prnu_rms: float = Field(
        0.0, ge=0.0, le=0.5, description="relative std of the per-pixel photo-response multiplier (PRNU)"
    )
    anchor_falloff: float = Field(
        0.0,
        ge=0.0,
        le=0.9,
        description="relative drop of the anchor intensity from the centre to the "
        "ends of the pixels read (a non-flat reference beam; mean kept at anchor_power_uw)",
    )
    hot_pixel_fraction: float = Field(0.0, ge=0.0, le=0.5, description="fraction of hot pixels")
    hot_pixel_factor: float = Field(
        20.0, ge=1.0, le=1e4, description="dark current of a hot pixel over a typical pixel"
    )
    read_noise_e: float = Field(6.0, ge=0.0, le=1e4, description="read noise std, electrons")
    gain_e_per_dn: float = Field(20.0, ge=1e-3, le=1e6, description="conversion gain, electrons/DN")
    adc_bits: int = Field(8, ge=1, le=24, description="ADC bit depth")
    black_level_dn: int = Field(10, ge=0, le=2**24, description="ADC offset, DN")
    full_well_e: float = Field(10000.0, ge=1.0, le=1e8, description="pixel full-well capacity, electrons")
    block_mb: float = Field(64.0, ge=0.01, le=65536.0, description="size of one generated matrix block, MiB")
    cache_mb: float = Field(512.0, ge=0.0, le=1e6, description="memory budget for cached blocks, MiB")
    compute: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="where the matrix is generated and frames are drawn; 'auto' takes CUDA when present"
    )

    @model_validator(mode="after")
    def _temperature_in_range(self) -> SimulatedProfile:
        if not self.temperature_min_c <= self.temperature_c <= self.temperature_max_c:
            raise ValueError(
                f"temperature_c = {self.temperature_c} is outside "
                f"[temperature_min_c, temperature_max_c] = "
                f"[{self.temperature_min_c}, {self.temperature_max_c}]"
            )
        band = self.reference_band
        if band is not None and not (0 <= band[0] < band[1] <= 50 and band[1] >= 0.05):
            raise ValueError(f"reference_band = {list(band)}: needs 0 <= low < high <= 50 (and high >= 0.05)")
        if band is not None and self.reference_field != "speckle":
            raise ValueError("reference_band selects pixels of a speckle reference: set reference_field = 'speckle'")
        if self.black_level_dn >= 2**self.adc_bits - 1:
            raise ValueError(f"black_level_dn must be below 2^adc_bits - 1 = {2**self.adc_bits - 1}")
        if self.frame_time_us is None and self.adc_bits > CMV2000.fps_by_bits[-1][0]:
            raise ValueError(
                f"adc_bits = {self.adc_bits}: the {CMV2000.model} reads out at most {CMV2000.fps_by_bits[-1][0]} "
                "bits; set frame_time_us to your camera's frame period"
            )
        return self

    @property
    def frame_period_us(self) -> float:
        """The camera's frame period: ``frame_time_us``, else the cited datasheet's at ``adc_bits``."""
        if self.frame_time_us is not None:
            return self.frame_time_us
        return CMV2000.frame_time_us(self.adc_bits)


SPEC = BackendSpec("simulated", SimulatedProfile, "opu_hal.backends.simulated.device:SimulatedDevice")
