"""The digitized read law keeps its stated error bounds against an independent reference (mpmath, 40 digits).

``opu_hal.privacy.digitized`` promises ``p_hat (1 - rel) - abs <= p <= p_hat (1 + rel) + abs`` at every
entry. The direct Poisson form ``x log(lambda) - lambda - log(x!)`` broke that promise at large means
(up to 7x the allowed error at lambda 2e4); Loader's form keeps it.
"""

from __future__ import annotations

import functools

import mpmath as mp
import numpy as np
import pytest
from scipy.special import gammaln

from opu_hal.privacy.digitized import FLUSH, CameraRead, read_log_pmf, read_pmf
from opu_hal.privacy.poisson_log_pmf import log_poisson_pmf

mp.mp.dps = 40


def _exact_log_poisson(x: float, mean: float) -> mp.mpf:
    lam = mp.mpf(mean)
    return x * mp.log(lam) - lam - mp.loggamma(x + 1)


@pytest.mark.parametrize("mean", [0.3, 4.0, 539.0, 2858.0, 2e4, 1e6])
def test_loaders_poisson_log_pmf_is_within_a_few_ulps_of_its_own_size(mean: float) -> None:
    sd = mean**0.5
    x = np.unique(np.clip(np.round(np.r_[mean + sd * np.linspace(-45, 45, 41), np.arange(20)]), 0, None))
    computed = log_poisson_pmf(x, mean)
    for xi, value in zip(x, computed):
        exact = _exact_log_poisson(float(xi), mean)
        if exact > -700:
            assert abs(float(mp.mpf(value) - exact)) <= 1e-14 * (abs(float(exact)) + 10)


def test_the_direct_poisson_form_cancels_where_loaders_does_not() -> None:
    x, mean = np.arange(19_500.0, 20_500.0, 7.0), 2e4
    direct = x * np.log(mean) - mean - gammaln(x + 1)
    exact = np.array([float(_exact_log_poisson(float(xi), mean)) for xi in x])
    assert np.max(np.abs(direct - exact)) > 1e-12  # 2e5-sized terms leave a few units
    assert np.max(np.abs(log_poisson_pmf(x, mean) - exact)) < 1e-13


def _exact_bin(camera: CameraRead, d: int, full_well_mass: mp.mpf) -> mp.mpf:
    """``P(DN = d)`` of eq. (2), each bin's Gaussian mass in the tail that does not cancel."""
    sigma, g = mp.mpf(camera.read_noise_e), mp.mpf(camera.gain_e_per_dn)
    full_well = int(np.floor(camera.full_well_e))
    low = (d - mp.mpf(camera.black_level_dn) - mp.mpf("0.5")) * g
    first, last = int(mp.floor(low - 40 * sigma)), int(mp.ceil(low + g + 40 * sigma))
    total = mp.mpf(0)
    for e in range(max(0, first), min(last, full_well) + 1):
        weight = full_well_mass if e == full_well else mp.exp(_exact_log_poisson(e, camera.mean_e))
        a = -mp.inf if d == 0 else (low - e) / sigma
        b = mp.inf if d == camera.max_dn else (low + g - e) / sigma
        total += weight * (mp.ncdf(-a) - mp.ncdf(-b) if a > 0 else mp.ncdf(b) - mp.ncdf(a))
    return total


@functools.lru_cache(maxsize=8)
def _full_well_mass(camera: CameraRead) -> mp.mpf:
    stop = int(camera.mean_e + 60 * camera.mean_e**0.5 + 900)
    return mp.fsum(mp.exp(_exact_log_poisson(k, camera.mean_e)) for k in range(int(camera.full_well_e), stop))


CAMERAS = [
    CameraRead(2858.0, 6.035, 1.00023, 12, 64.05, 4000.0),  # the main job's bright bin, its full well in reach
    CameraRead(20_000.0, 5.0, 1.0, 16, 100.0, 1e5),
    CameraRead(4.0, 3.0, 20.0, 8, 10.3, 3e4),
    CameraRead(50.0, 6.0, 7.0, 8, 10.0, 2e4),
]


@pytest.mark.parametrize("camera", CAMERAS, ids=lambda c: f"{c.mean_e:g}e-")
def test_every_kept_read_probability_is_within_its_stated_error_of_the_exact_law(camera: CameraRead) -> None:
    log_pmf, _ = read_log_pmf(camera)
    noise = read_pmf(camera)
    kept = np.flatnonzero(log_pmf > np.log(FLUSH))
    mode = int(kept[np.argmax(log_pmf[kept])])
    near = kept[np.abs(kept - mode) <= 300]  # a 16-bit law's far bins cost mpmath minutes
    picks = np.unique(np.r_[near[:: max(1, len(near) // 10)], near[:2], near[-2:], mode, mode + 1])
    mass = _full_well_mass(camera) if camera.full_well_e < camera.mean_e + 60 * camera.mean_e**0.5 + 900 else mp.mpf(0)
    for d in picks:
        exact = _exact_bin(camera, int(d), mass)
        computed = mp.exp(mp.mpf(float(log_pmf[d])))
        assert abs(computed - exact) <= noise.rel_err * computed + noise.abs_err, (int(d), float(computed / exact - 1))
