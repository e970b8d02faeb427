"""Physical plausibility of a calibration file, checked on load: a file edited by hand or damaged in
transit can hold numbers a camera cannot produce (negative photo-electrons, more electrons per read
than the full well or the ADC can hold), and a plan on them promises noise the device never makes.
Each problem names the key and its allowed range."""

from __future__ import annotations

import math
from typing import Any

#: A :class:`.schema.Calibration` (read by attribute: the schema imports this module).
Calibration = Any


def _range(key: str, value: float, low: float, high: float, *, low_open: bool = False) -> str | None:
    below = value <= low if low_open else value < low
    if math.isfinite(value) and not below and value <= high:
        return None
    end = "]" if math.isfinite(high) else ")"
    return (
        f"key '{key}' must be in {'(' if low_open else '['}{low:g}, {high:g}{end} (physically plausible), got {value!r}"
    )


#: How far a measured bound may sit above the camera's declared ceiling (bootstrap and gain error).
SLACK = 1.5


def physics_ceiling_e(calibration: Calibration) -> float:
    """The most photo-electrons one read of the camera can report by its physics keys: the larger of
    the full well and the ADC's top code above the black level times the gain (inf when undeclared)."""
    physics: dict[str, Any] = calibration.device.physics or {}
    limits = []
    if isinstance(physics.get("full_well_e"), (int, float)):
        limits.append(float(physics["full_well_e"]))
    bits, gain, black = physics.get("adc_bits"), physics.get("gain_e_per_dn"), physics.get("black_level_dn") or 0
    if isinstance(bits, int) and isinstance(gain, (int, float)):
        limits.append((2**bits - 1 - black) * gain)
    return max(limits) if limits else math.inf


def implausible(calibration: Calibration) -> str | None:
    """The first physically implausible value of ``calibration`` (key, range, value), or None."""
    problems = [
        _range("saturation_e.lower", calibration.saturation_e.lower, 0.0, math.inf, low_open=True),
        _range("read_noise_e.lower", calibration.read_noise_e.lower, 0.0, math.inf),
    ]
    physics = SLACK * physics_ceiling_e(calibration)
    problems.append(_range("saturation_e.upper", calibration.saturation_e.upper, 0.0, physics))
    ceiling = max(calibration.saturation_e.upper, physics_ceiling_e(calibration))
    for i, op in enumerate(calibration.operating_points):
        key = f"operating_points.{i}"
        problems += [
            _range(f"{key}.anchor_e.lower", op.anchor_e.lower, 0.0, ceiling, low_open=True),
            _range(f"{key}.anchor_e.upper", op.anchor_e.upper, 0.0, ceiling, low_open=True),
            _range(f"{key}.anchor_read_e_min_pixel_lower", op.anchor_read_e_min_pixel_lower, 0.0, ceiling),
            _range(f"{key}.anchor_e_max_pixel_upper", op.anchor_e_max_pixel_upper, 0.0, ceiling),
            _range(f"{key}.dark_e.upper", op.dark_e.upper, -math.inf, ceiling),  # a bound on ~0 e- may dip below 0
        ]
    return next((p for p in problems if p is not None), None)
