"""The anchor map's Bernstein lower bounds (opu_hal/calibration/anchor_lower.py), the ones the accountant
uses: they hold on skewed reads at their stated level, cost nothing over Student's bound at the map's own
level, and a pixel whose frames agree by chance keeps its Poisson margin."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from opu_hal.calibration.anchor_lower import bernstein_floor_dn
from opu_hal.calibration.anchor_map import bounds_from_frames
from opu_hal.calibration.anchor_upper import pooled_read_variance_dn2

FRAMES, BLACK = 64, 10.0
CAMERAS = [(20.0, 3.0, 1.0), (4.0, 3.0, 1.0), (300.0, 6.0, 2.5), (180.0, 6.0, 4.0)]  # mean e-, read noise e-, gain


def _reads(rng: np.random.Generator, mean_e: float, noise_e: float, gain: float, maps: int) -> np.ndarray:
    """``maps`` pixels x FRAMES rounded reads in DN: Poisson electrons plus Gaussian read noise."""
    electrons = rng.poisson(mean_e, (maps, FRAMES)) + rng.normal(0.0, noise_e, (maps, FRAMES))
    return np.rint(electrons / gain + BLACK)


def _student_lower_e(reads: np.ndarray, level: float, gain: float) -> np.ndarray:
    """The lower bound the map used before: ``g (m - t s / sqrt(F) - B)``, ``s^2`` at least 1/12."""
    spread = np.maximum(reads.std(axis=1, ddof=1), math.sqrt(1 / 12))
    return gain * (reads.mean(axis=1) - stats.t.isf(level, FRAMES - 1) * spread / math.sqrt(FRAMES) - BLACK)


@pytest.mark.parametrize(("mean_e", "noise_e", "gain"), CAMERAS)
def test_the_bernstein_lower_bound_fails_at_most_at_its_level_on_skewed_reads(mean_e, noise_e, gain):
    level, maps = 1e-3, 300_000
    reads = _reads(np.random.default_rng(int(mean_e)), mean_e, noise_e, gain, maps)
    read_var = pooled_read_variance_dn2(noise_e, gain)
    floor = bernstein_floor_dn(reads.mean(axis=1), FRAMES, level, (BLACK, BLACK), gain, read_var)
    assert np.count_nonzero(gain * floor > mean_e) <= level * maps  # holds for every sample size


@pytest.mark.parametrize(("mean_e", "noise_e", "gain"), CAMERAS)
def test_the_proof_costs_nothing_over_students_bound_at_the_maps_level(mean_e, noise_e, gain):
    level, maps = 0.01 / (2 * 2_219_520), 20_000  # alpha / (2 P) on LightOn's full sensor
    reads = _reads(np.random.default_rng(7), mean_e, noise_e, gain, maps)
    floor = gain * bernstein_floor_dn(reads.mean(axis=1), FRAMES, level, (BLACK, BLACK), gain, noise_e**2 / gain**2)
    student = np.maximum(_student_lower_e(reads, level, gain), 0.0)
    assert abs(np.median(student - floor)) < 0.1 * math.sqrt(mean_e + noise_e**2)


def test_a_pixel_whose_frames_agree_by_chance_keeps_its_poisson_margin():
    frames = [np.array([30.0, 30.0]) for _ in range(FRAMES)]  # every read alike: Student's s is 0
    bounds = bounds_from_frames(frames, 255.0, (BLACK, BLACK), (1.0, 1.0), 0.01, "agreeing frames", read_var_dn2=0.1)
    z = math.sqrt(2 * math.log(2 * 2 / 0.01) / FRAMES)
    assert np.all(bounds.lower_e <= 20.0 - 0.5 - z * np.sqrt(bounds.lower_e))  # the spread of its own Poisson
    assert np.all(_student_lower_e(np.stack(frames, axis=1), 0.01 / 4, 1.0) > 19.85)  # Student's kept 0.15 e-


def test_the_bound_solves_its_inequality_and_is_zero_for_an_unknown_offset():
    mean, level, gain, read_var = np.array([50.0, 300.0, 50.0, 50.0]), 1e-6, 0.8, 4.0
    low, high = np.array([10.0, 10.0, -np.inf, 10.0]), np.array([11.0, 12.0, 11.0, np.inf])
    floor = bernstein_floor_dn(mean, FRAMES, level, (low, high), gain, read_var)
    u = floor[:2] + high[:2] - low[:2]  # the bound on mu_Y - O_lo
    log_q = math.log(1 / level)
    z = math.sqrt(2 * log_q / FRAMES)
    head = mean[:2] - 0.5 - low[:2] - log_q / (3 * gain * FRAMES)
    assert np.allclose(u + z * np.sqrt(u / gain + read_var), head, rtol=1e-12)
    assert np.all(floor[:2] < mean[:2] - 0.5 - high[:2]) and np.all(floor[2:] == 0.0)
    with pytest.raises(ValueError, match="level"):
        bernstein_floor_dn(mean, FRAMES, 1.0, (low, high), gain, read_var)


def test_a_pixel_at_its_offset_gets_zero_not_a_negative_bound():
    floor = bernstein_floor_dn(np.array([BLACK, BLACK - 3.0]), FRAMES, 1e-3, (BLACK, BLACK), 1.0, 9.0)
    assert np.array_equal(floor, [0.0, 0.0])
