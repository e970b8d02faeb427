"""The calibrated law of one anchor-only read (:class:`~opu_hal.contract.calibration.ReadBox`): every
quantity the digitized privacy route accounts with, from the measurement, each as an interval.

- mean photo-electrons: :meth:`.calibrated.CalibratedNoise.anchor_read_box` (the dimmest pixel's lower
  bound to the brightest upper end);
- read noise: from the lower bound over the pixels (:mod:`.pixel_read_noise`; never the pooled interval's
  lower end, a mean over pixels) to the pooled interval's upper end;
- gain and black level: their calibrated intervals;
- full well: the clip level's interval where the sweep saw the full well; where the ADC range hid it (it
  is only known to lie above the ADC's top), from the clip level's lower end to :data:`FULL_WELL_UNKNOWN_E`
  (any full well above the ADC's top plus 37 read-noise sd gives the same law of a read).
"""

from __future__ import annotations

from ..contract.calibration import ReadBox
from ..contract.errors import CalibrationError
from .pixel_read_noise import floor_over_pixels

FULL_WELL_UNKNOWN_E = 1e8  # the largest full well the digitized law takes (opu_hal.privacy.digitized)
READ_NOISE_FLOOR_E = 1e-2  # a read-noise bound of 0 is taken as this (the rounding-only law, 1e-2 e- rms)


def calibrated_read_box(noise, temperature_c: float) -> ReadBox:
    """The box of one read at ``temperature_c`` (module docstring); refused for a calibration without the
    per-pixel read-noise bound (written before it existed)."""
    cal = noise.calibration
    mean, _pooled, gain, source = noise.anchor_read_box(temperature_c)
    if cal.read_noise_e_min_pixel_lower is None:
        raise CalibrationError(
            f"{noise.path}: key 'read_noise_e_min_pixel_lower' is missing (a calibration written before the "
            "per-pixel read-noise bound): the digitized route counts read noise per pixel; re-run `opu-hal calibrate`"
        )
    read_low = max(floor_over_pixels(cal.read_noise_e_min_pixel_lower), READ_NOISE_FLOOR_E)
    saturation = cal.saturation_e
    full_well = (
        (saturation.lower, saturation.upper)
        if cal.saturation_limited_by == "full_well"
        else (saturation.lower, FULL_WELL_UNKNOWN_E)
    )
    return ReadBox(
        mean_e=mean,
        read_noise_e=(read_low, max(cal.read_noise_e.upper, read_low)),
        gain_e_per_dn=gain,
        black_level_dn=(cal.black_level_dn.lower, cal.black_level_dn.upper),
        full_well_e=full_well,
        source=f"{source}; read noise from the quietest pixel's lower bound; gain, black level and full well "
        "over their calibrated intervals",
    )
