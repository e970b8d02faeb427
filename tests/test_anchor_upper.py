"""The anchor map's Chernoff upper bounds (opu_hal/calibration/anchor_upper.py): they hold on skewed reads
at their stated level, where Student's upper bound does not, and a pixel whose frames agree by chance
still gets its Poisson spread."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from opu_hal.calibration.anchor_map import bounds_from_frames
from opu_hal.calibration.anchor_upper import chernoff_rise_dn, pooled_read_variance_dn2, read_variance_upper_dn2
from opu_hal.calibration.pixel_offset import frame_moments

FRAMES, BLACK = 64, 10.0


def _reads(rng: np.random.Generator, mean_e: float, noise_e: float, gain: float, maps: int) -> np.ndarray:
    """``maps`` pixels x FRAMES rounded reads in DN: Poisson electrons plus Gaussian read noise."""
    electrons = rng.poisson(mean_e, (maps, FRAMES)) + rng.normal(0.0, noise_e, (maps, FRAMES))
    return np.rint(electrons / gain + BLACK)


@pytest.mark.parametrize(("mean_e", "noise_e", "gain"), [(20.0, 3.0, 1.0), (4.0, 3.0, 1.0), (300.0, 6.0, 2.5)])
def test_the_chernoff_upper_bound_fails_at_most_at_its_level_on_skewed_reads(mean_e, noise_e, gain):
    level, maps = 1e-3, 300_000
    reads = _reads(np.random.default_rng(int(mean_e)), mean_e, noise_e, gain, maps)
    read_var = pooled_read_variance_dn2(noise_e, gain)
    rise = chernoff_rise_dn(reads.mean(axis=1), FRAMES, level, np.full(maps, BLACK), gain, read_var)
    failures = np.count_nonzero(gain * rise < mean_e)
    assert failures <= level * maps  # Chernoff holds for every sample size, not only in the limit
    student = reads.mean(axis=1) + stats.t.isf(level, FRAMES - 1) * reads.std(axis=1, ddof=1) / math.sqrt(FRAMES)
    width = np.median(gain * rise - (student - BLACK) * gain)  # what the proof costs over Student's bound
    assert width < 0.6 * math.sqrt(mean_e + noise_e**2)


def test_a_pixel_whose_frames_agree_by_chance_keeps_its_poisson_margin():
    frames = [np.array([30.0, 30.0]) for _ in range(FRAMES)]  # every read alike: Student's s is 0
    bounds = bounds_from_frames(frames, 255.0, (BLACK, BLACK), (1.0, 1.0), 0.01, "agreeing frames", read_var_dn2=0.1)
    z = math.sqrt(2 * math.log(4 * 2 / 0.01) / FRAMES)
    assert np.all(bounds.upper_e >= 20.0 + z * math.sqrt(20.0))  # at least the spread of 20 e- of Poisson


def test_the_bound_solves_its_inequality_and_is_infinite_for_an_unknown_offset():
    mean, level, gain, read_var = np.array([50.0, 12.0, 10.0]), 1e-6, 0.8, 4.0
    offset = np.array([10.0, 10.0, -np.inf])
    rise = chernoff_rise_dn(mean, FRAMES, level, offset, gain, read_var)
    z = math.sqrt(2 * math.log(1 / level) / FRAMES)
    head = mean[:2] + 0.5 - offset[:2]
    assert np.allclose(rise[:2] - head, z * np.sqrt(rise[:2] / gain + read_var), rtol=1e-12)
    assert np.isinf(rise[2])
    with pytest.raises(ValueError, match="level"):
        chernoff_rise_dn(mean, FRAMES, 0.0, offset, gain, read_var)


def test_dark_frames_bound_each_pixels_read_variance_and_a_clipped_pixel_gets_none():
    rng = np.random.default_rng(5)
    noise = np.array([2.0, 5.0, 1.0])
    darks = [np.rint(40.0 + rng.normal(0.0, noise)) for _ in range(200)]
    darks[3][2] = 0.0  # one clipped read
    bound = read_variance_upper_dn2(frame_moments(darks, 255.0, "darks"), 1e-6)
    assert np.all(bound[:2] >= noise[:2] ** 2) and np.all(bound[:2] < 2.5 * noise[:2] ** 2)
    assert np.isinf(bound[2])
