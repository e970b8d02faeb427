"""``opu-hal plan --profile P`` for a real LightOn profile (``simulated = false``): from its recorded calibration.

A LightOn OPU is reached through lightonml, whose camera noise cannot be read from the SDK, so the plan
of a ``backend = "lighton"`` profile never opens the device: it reads the calibration the profile names
(key ``calibration``, relative to the profile file; or ``--calibration``), written by ``opu-hal calibrate
PROFILE --frames-dir DIR`` from frames recorded with lightonml (docs/own-camera.md). Every quantity of
the read law comes from that file, each as its calibrated interval (:mod:`.read_box`); from the profile
only the operating point (``temperature_c``, ``exposure_us``: lightonml reads no temperature) and
whether the OPU has a reference beam (``anchor_power_uw``). The camera time is priced at the cited
datasheet's frame period at the recorded bit depth (:mod:`opu_hal.camera.datasheet`).

- ``--mechanism digitized`` with a reference beam (``anchor_power_uw`` set): the exact accounting of
  :mod:`.digitized_command` over the calibration's box, every pixel sharing one law.
- ``--mechanism digitized`` without one (a LightOn OPU's anchor is a DMD pattern read as speckle): digitized
  speckle counts (:mod:`.recorded_speckle`): the pixels kept by their per-pixel bounds in the anchor map
  that ``calibrate`` measured from the recorded anchor series (:mod:`.recorded_anchor_map`), accounted per
  bin of kept means, ``2 reads ceil(n / K)`` frames per draw of ``n`` values; a calibration without the
  map (written before it, or without a speckle profile) is refused, naming the file.
- ``--mechanism skellam``: refused unless the calibration proves unity gain
  (:meth:`.calibrated.CalibratedNoise.check_unity_gain`), which no recorded 8-bit camera does.

Only the plan: training on a real LightOn OPU draws no anchor-only read (lightonml 1.4.3 shows no anchor
pattern alone), so no plan made here can yet be run.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from ..camera.datasheet import CMV2000
from ..contract.errors import CalibrationError
from ..contract.noise import DigitizedReadLaw
from .calibrated import CalibratedNoise
from .identity import check_profile
from .schema import read_calibration


def recorded_calibration_path(profile, given: str | None) -> Path:
    """``--calibration`` (against the working directory), else the profile's ``calibration`` key (relative
    to the profile file); refused, naming the file and the key, when neither is set."""
    if given is not None:
        return Path(given)
    if profile.calibration is None:
        where = profile.source if profile.source is not None else f"profile {profile.label!r}"
        raise CalibrationError(
            f"{where}: key 'calibration' is unset: a LightOn camera's privacy noise is planned from its measured "
            "calibration only, never from the profile's keys. Record frames with lightonml (docs/own-camera.md), "
            f"run `opu-hal calibrate {profile.source or 'PROFILE'} --frames-dir DIR --out CAL`, then set "
            'calibration = "CAL" in the profile (or pass --calibration CAL)'
        )
    path = Path(profile.calibration)
    if not path.is_absolute() and profile.source is not None:
        path = Path(profile.source).parent / path
    return path


def recorded_noise(profile, given: str | None) -> CalibratedNoise:
    """The calibration a LightOn ``profile`` plans with, checked against its identity and operating point."""
    path = recorded_calibration_path(profile, given)
    if not path.is_file():
        key = "--calibration" if given is not None else f"{profile.source}: key 'calibration'"
        raise CalibrationError(f"{key}: {path} is not a file (write it with `opu-hal calibrate ... --frames-dir DIR`)")
    calibration, where = read_calibration(path), path.resolve()
    check_profile(calibration, profile, where)
    exposure = profile.declared("exposure_us")
    powers = {p.anchor_power_uw for p in calibration.operating_points if math.isclose(p.exposure_us, exposure)}
    if len(powers) > 1:
        raise CalibrationError(
            f"{where}: the anchor series at {exposure:g} us were recorded at {sorted(powers)} (powers): record "
            "every anchor series of the operating exposure at one anchor power"
        )
    # The anchor as recorded (never rescaled by a profile key); the anchor reads only, so frames recorded at a
    # relative illumination (power = 1.0, no quantum efficiency) plan as well.
    anchor_power = powers.pop() if powers else 0.0
    noise = CalibratedNoise(calibration, where, profile.mode, exposure, 0.0, anchor_power, signal=False)
    noise.check_operating_point(profile.declared("temperature_c"), profile.declared("exposure_us"))
    return noise


def frame_time_s(profile, adc_bits: int) -> float:
    """One anchor-only frame's period: the CMV2000 datasheet's full-frame period at ``adc_bits``, never
    shorter than the exposure or the DMD frame time the profile declares."""
    return max(CMV2000.frame_time_us(adc_bits), profile.exposure_us or 0.0, profile.frametime_us or 0.0) * 1e-6


def recorded_read_law(profile, noise: CalibratedNoise, dimension: int | None = None) -> DigitizedReadLaw:
    """One anchor-only read's law from the calibration alone, at the profile's declared temperature; without a
    reference beam (no ``anchor_power_uw``), the kept speckle pixels' law for draws of ``dimension`` values."""
    cal = noise.calibration
    if cal.adc_bits is None:
        raise CalibrationError(
            f"{noise.path}: key 'adc_bits' is missing (a calibration not written from recorded frames): re-run "
            "`opu-hal calibrate PROFILE --frames-dir DIR` (the manifest's bit_depth)"
        )
    if profile.anchor_power_uw is None:
        from .recorded_speckle import recorded_speckle_law

        if dimension is None:
            raise CalibrationError(
                f"profile {profile.label!r}: a speckle anchor (no 'anchor_power_uw') keeps its pixels for draws of "
                "a known size: give --dimension D"
            )
        return recorded_speckle_law(profile, noise, dimension, frame_time_s(profile, cal.adc_bits))
    box = noise.digitized_read_box(profile.declared("temperature_c"))
    return DigitizedReadLaw(
        mean_e=box.mean_e,
        read_noise_e=box.read_noise_e,
        gain_e_per_dn=box.gain_e_per_dn[0],
        adc_bits=cal.adc_bits,
        black_level_dn=box.black_level_dn[0],
        full_well_e=box.full_well_e[0],
        source=box.source,
        pixels_per_frame=cal.pixels,
        frame_time_s=frame_time_s(profile, cal.adc_bits),
        gain_e_per_dn_high=box.gain_e_per_dn[1],
        black_level_dn_high=box.black_level_dn[1],
        full_well_e_high=box.full_well_e[1],
    )


def run_recorded_plan(args: argparse.Namespace, profile) -> int:
    """``opu-hal plan --profile P`` for a real LightOn profile (module docstring); a refusal names its reason."""
    from .command_args import shape_from_args
    from .digitized_command import run_digitized_plan

    shape = shape_from_args(args)
    noise = recorded_noise(profile, args.calibration)
    if not args.json:
        print(
            f"{profile.label}: calibration {noise.path} (measured from recorded frames; the profile's keys give none)"
        )
    if args.mechanism == "skellam":
        noise.check_unity_gain()  # refuses every camera a sweep measures: no affordable sweep proves unity
        raise CalibrationError(
            f"{noise.path}: unity gain is proven, but Skellam counts are not planned from a recorded calibration: "
            "use --mechanism digitized (exact at any gain, unity included)"
        )
    law = recorded_read_law(profile, noise, shape.dimension)
    return run_digitized_plan(args, profile, noise.path, shape, law=law)
