"""The digitized route accounts from the measurement: gain, black level, read noise and full well come
from the calibration's intervals (never the profile's keys when a calibration is given), read noise as a
bound over the pixels, and the reported epsilon is never below the epsilon at any corner of the box."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import opu_hal
from opu_hal import DeviceUnavailable
from opu_hal.calibration.calibrated import load_calibrated_noise
from opu_hal.calibration.emva_sweep import series_of
from opu_hal.calibration.pixel_read_noise import floor_over_pixels, pixel_read_noise_lower
from opu_hal.calibration.schema import read_calibration
from opu_hal.contract.errors import CalibrationError
from opu_hal.contract.noise import DigitizedReadLaw
from opu_hal.privacy import Accountant
from opu_hal.privacy.digitized import CameraRead
from opu_hal.privacy.digitized_box import box_cameras
from opu_hal.privacy.digitized_lattice import DigitizedLattice
from opu_hal.privacy.skellam import SkellamLattice

DATA = Path(__file__).parent / "data" / "plots"
# an 8-bit camera near 4 e-/DN whose every interval has width; its reads reach the full well's range
LAW = DigitizedReadLaw(
    mean_e=(100.0, 140.0),
    read_noise_e=(1.0, 3.0),
    gain_e_per_dn=3.9,
    adc_bits=8,
    black_level_dn=9.9,
    full_well_e=900.0,
    source="test box",
    gain_e_per_dn_high=4.1,
    black_level_dn_high=10.1,
    full_well_e_high=1000.0,
)


def corner_laws(law: DigitizedReadLaw) -> list[DigitizedReadLaw]:
    ends = [
        law.mean_e,
        law.read_noise_e,
        (law.gain_e_per_dn, law.high("gain_e_per_dn")),
        (law.black_level_dn, law.high("black_level_dn")),
        (law.full_well_e, law.high("full_well_e")),
    ]
    return [
        replace(
            law,
            mean_e=(m, m),
            read_noise_e=(r, r),
            gain_e_per_dn=g,
            black_level_dn=b,
            full_well_e=w,
            gain_e_per_dn_high=None,
            black_level_dn_high=None,
            full_well_e_high=None,
        )
        for m, r, g, b, w in itertools.product(*ends)
    ]


def epsilon(law: DigitizedReadLaw, reads: int = 1) -> float:
    lattice = DigitizedLattice(SkellamLattice(1, 1.0, 2.0, "per-coordinate"), law, max_reads=4, box_points=2)
    accountant = Accountant("replace_one")
    accountant.step(lattice.event_for_reads(1000, 100, reads), 10)
    return accountant.get_epsilon(1e-5)


def test_the_box_grid_holds_every_corner_of_the_five_calibrated_quantities():
    low = CameraRead(100.0, 1.0, 3.9, 8, 9.9, 900.0)
    grid = box_cameras(low, 140.0, 3.0, 3, gain_e_per_dn_high=4.1, black_level_dn_high=10.1, full_well_e_high=1000.0)
    seen = {(c.mean_e, c.read_noise_e, c.gain_e_per_dn, c.black_level_dn, c.full_well_e) for c in grid}
    corners = set(itertools.product((100.0, 140.0), (1.0, 3.0), (3.9, 4.1), (9.9, 10.1), (900.0, 1000.0)))
    assert corners <= seen and len(grid) == 3 * 3 * 2 * 2 * 2


def test_a_full_well_beyond_every_evaluated_electron_count_collapses_to_one_end():
    low = CameraRead(100.0, 1.0, 3.9, 8, 9.9, 5000.0)
    grid = box_cameras(low, 140.0, 3.0, 2, full_well_e_high=1e8)
    assert {c.full_well_e for c in grid} == {5000.0}


def test_the_reported_epsilon_is_never_below_the_epsilon_at_any_corner_of_the_box():
    reported = epsilon(LAW)
    at_corners = [epsilon(corner) for corner in corner_laws(LAW)]
    assert len(at_corners) == 32 and reported >= max(at_corners) * (1 - 1e-12)
    assert max(at_corners) > min(at_corners) * 1.01  # the box is wide enough for its corners to differ


def unity_noise(**update):
    """tests/data/plots' real calibration of the unity camera, with ``update`` applied."""
    calibration = read_calibration(DATA / "opu-unity-cal.json").model_copy(update=update)
    return load_calibrated_noise(calibration, opu_hal.load_profile(DATA / "opu-unity.toml"))


def test_the_read_box_takes_every_quantity_from_the_calibration_and_read_noise_from_the_pixel_bound():
    noise = unity_noise(read_noise_e_min_pixel_lower=5.5)
    cal = noise.calibration
    box = noise.digitized_read_box(cal.temperatures_c[0])
    assert box.read_noise_e == (5.5, cal.read_noise_e.upper) and cal.read_noise_e.lower > 5.5
    assert box.gain_e_per_dn == (cal.gain_e_per_dn.lower, cal.gain_e_per_dn.upper)
    assert box.black_level_dn == (cal.black_level_dn.lower, cal.black_level_dn.upper)
    assert box.full_well_e == (cal.saturation_e.lower, cal.saturation_e.upper)  # full-well limited


def test_a_simulated_device_with_a_calibration_accounts_the_calibrations_gain_interval_not_the_profiles_gain():
    noise = unity_noise(read_noise_e_min_pixel_lower=5.5)
    device = opu_hal.load_device(opu_hal.load_profile(DATA / "opu-unity.toml"))
    device.attach_calibration(noise)
    law = device.digitized_read_law()
    cal = noise.calibration
    assert (law.gain_e_per_dn, law.high("gain_e_per_dn")) == (cal.gain_e_per_dn.lower, cal.gain_e_per_dn.upper)
    assert (law.black_level_dn, law.high("black_level_dn")) == (cal.black_level_dn.lower, cal.black_level_dn.upper)
    assert (law.full_well_e, law.high("full_well_e")) == (cal.saturation_e.lower, cal.saturation_e.upper)
    assert law.read_noise_e == (5.5, cal.read_noise_e.upper)
    profile = device.profile
    assert (law.gain_e_per_dn, law.black_level_dn, law.full_well_e) != (
        profile.gain_e_per_dn,
        profile.black_level_dn,
        profile.full_well_e,
    )


def test_a_calibration_without_the_per_pixel_read_noise_bound_is_refused_naming_the_key():
    noise = unity_noise(read_noise_e_min_pixel_lower=None)  # a file written before the key existed
    with pytest.raises(CalibrationError, match="key 'read_noise_e_min_pixel_lower' is missing"):
        noise.digitized_read_box(noise.calibration.temperatures_c[0])


def test_a_lighton_device_without_a_calibration_refuses_naming_what_to_pass():
    profile = {"backend": "lighton", "in_features": 12, "out_features": 64, "simulated": True}
    device = opu_hal.load_device(opu_hal.validate_profile(profile))
    with pytest.raises(DeviceUnavailable, match="pass --calibration FILE.*--frames-dir"):
        device.digitized_read_law()


def test_the_per_pixel_read_noise_bounds_hold_for_every_pixel_and_the_floor_takes_the_pixels_used():
    """Dark frames of pixels with known read noise (1-4 e-) and dark signal, at 2 e-/DN: every pixel's
    bound lies below its own read noise, and the floor over a subset is that subset's smallest bound."""
    rng = np.random.default_rng(0)
    pixels, frames, gain = 2000, 64, 2.0
    sigma = rng.uniform(1.0, 4.0, pixels) * 2
    darks = []
    for exposure in (100.0, 10_000.0):
        electrons = rng.poisson(0.01 * exposure, (frames, pixels)) + rng.normal(0.0, sigma, (frames, pixels))
        darks.append(series_of(np.round(electrons / gain) + 20, exposure, 0.0, 4095, 20.0))
    bounds = pixel_read_noise_lower(darks, gain, 0.05)
    assert np.all(bounds <= sigma) and np.median(bounds / sigma) > 0.6
    used = sigma > 6.0
    assert floor_over_pixels(bounds, used) == pytest.approx(bounds[used].min())
    assert floor_over_pixels(float(bounds.min())) == bounds.min()
