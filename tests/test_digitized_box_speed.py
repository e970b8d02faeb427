"""The fast digitized box accounting computes what the per-order reference computes: every order's shift
moment at once, and the fewest reads found by doubling then bisection."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from opu_hal.contract.noise import DigitizedReadLaw
from opu_hal.privacy import Accountant
from opu_hal.privacy.digitized import CameraRead, difference_pmf
from opu_hal.privacy.digitized_lattice import DigitizedLattice, fewest_box_reads
from opu_hal.privacy.far_bound import THETA_CELLS, far_bounds
from opu_hal.privacy.pmf_rdp import AccountedPMF, _far, pmf_coefficients
from opu_hal.privacy.rounding import MAX_ORDER
from opu_hal.privacy.skellam import SkellamLattice
from tests.test_digitized_calibrated import LAW

CAMERAS = (
    CameraRead(120.0, 2.0, 4.0, 8, 10.0, 900.0),  # reads reach the full well
    CameraRead(950.0, 7.0, 4.0, 8, 10.0, 10000.0),  # near the ADC top: clip atom
    CameraRead(300.0, 0.5, 0.993, 10, 63.7, 10000.0),  # near unity gain, rounding dominates
)


@pytest.mark.parametrize("camera", CAMERAS)
def test_every_orders_shift_moment_at_once_equals_the_per_order_moment(camera: CameraRead) -> None:
    model = AccountedPMF(difference_pmf(camera, 1), 4)
    alphas = np.arange(2, MAX_ORDER + 1, dtype=np.float64)
    for s in (1, -1, 3, -5):
        fast = model.shift_log_moments(alphas, s)
        slow = np.array([model.integer_shift_log_moment(int(a), s) for a in alphas])
        assert np.allclose(fast, slow, rtol=1e-12, atol=1e-12)


def test_doubling_then_bisection_finds_the_fewest_reads_a_linear_scan_finds() -> None:
    law = DigitizedReadLaw(
        mean_e=(40.0, 44.0),
        read_noise_e=(1.0, 1.5),
        gain_e_per_dn=2.0,
        adc_bits=8,
        black_level_dn=10.0,
        full_well_e=10000.0,
        source="test",
    )
    lattice = DigitizedLattice(SkellamLattice(100, 1.0, 3.0, "per-coordinate"), law, max_reads=16, box_points=2)

    def epsilon(reads: int) -> float:
        accountant = Accountant("replace_one")
        accountant.step(lattice.event_for_reads(1000, 100, reads), 50)
        return accountant.get_epsilon(1e-5)

    curve = [epsilon(r) for r in range(1, 17)]
    target = (curve[4] + curve[5]) / 2  # 6 reads is the fewest that fits
    trace: list[tuple[int, float]] = []
    assert fewest_box_reads(lattice, 1000, 100, 50, target, 1e-5, trace) == (6, curve[5])
    assert max(reads for reads, _ in trace) <= 8  # never the cap's 16 reads when 6 fit
    assert fewest_box_reads(lattice, 1000, 100, 50, curve[-1] * 0.99, 1e-5) is None


def test_the_box_epsilon_is_never_below_the_epsilon_at_random_interior_points_of_the_box() -> None:
    """An attack on the grid (points between its nodes) on an 8-bit camera whose reads reach the full well."""
    law = LAW  # an 8-bit camera near 4 e-/DN whose every interval has width

    def epsilon(point: DigitizedReadLaw) -> float:
        lattice = DigitizedLattice(SkellamLattice(1, 1.0, 2.0, "per-coordinate"), point, max_reads=4)
        accountant = Accountant("replace_one")
        accountant.step(lattice.event_for_reads(1000, 100, 1), 10)
        return accountant.get_epsilon(1e-5)

    reported = epsilon(law)
    rng = np.random.default_rng(43)
    for u in rng.uniform(size=(6, 5)):
        m, r, g, b, w = (
            lo + x * (hi - lo)
            for x, (lo, hi) in zip(u, [law.mean_e, law.read_noise_e, (3.9, 4.1), (9.9, 10.1), (900.0, 1000.0)])
        )
        point = DigitizedReadLaw(
            mean_e=(m, m),
            read_noise_e=(r, r),
            gain_e_per_dn=g,
            adc_bits=8,
            black_level_dn=b,
            full_well_e=w,
            source="point",
        )
        assert epsilon(point) <= reported * (1 + 1e-12)


def _full_grid_far(alpha: float, row: np.ndarray) -> float:
    """The far bound on every theta cell, each cell at the larger end of its numerator."""
    shifts = np.arange(1, len(row) - 1, dtype=np.float64)[:, None]
    edges = np.linspace(0.0, 1.0, THETA_CELLS + 1)[None, :]
    with np.errstate(divide="ignore"):
        n = np.logaddexp(np.log1p(-edges) + (alpha - 1) * row[1:-1, None], np.log(edges) + (alpha - 1) * row[2:, None])
    return float(np.max(np.maximum(n[:, :-1], n[:, 1:]) / ((alpha - 1) * (shifts + edges[:, :-1]) ** 2)))


@pytest.mark.parametrize("monotone", [True, False])
def test_the_coarse_to_fine_far_bound_equals_the_full_grid_of_theta_cells(monotone: bool) -> None:
    rng = np.random.default_rng(7)
    alphas = np.arange(2, MAX_ORDER + 1, dtype=np.float64)
    shifts = np.arange(40, dtype=np.float64)
    rows = 0.05 * shifts**2 * rng.uniform(0.7, 1.3, (len(alphas), 1)) * (1 + 0.01 * alphas[:, None])
    if not monotone:  # E(s + 1) < E(s) somewhere: a cell's worst end is then its low end
        rows *= rng.uniform(0.5, 1.5, rows.shape)
    rows[:, 0] = 0.0
    fast = far_bounds(alphas, rows)
    assert np.array_equal(fast, [_full_grid_far(a, row) for a, row in zip(alphas, rows)])
    per_order = [_far(int(a), row) for a, row in zip(alphas, rows)]  # high end only: never above the full grid
    assert np.all(fast >= np.asarray(per_order) * (1 - 1e-15))


@pytest.mark.parametrize("camera", CAMERAS)
def test_a_symmetric_law_is_accounted_on_one_side_and_no_lower_than_on_both(camera: CameraRead) -> None:
    noise = difference_pmf(camera, 2)
    assert noise.symmetric and noise.support[0] == -noise.support[-1]
    one_sided = AccountedPMF(noise, 4)
    assert np.array_equal(one_sided.log_hi, one_sided.log_hi[::-1])
    both = AccountedPMF(replace(noise, symmetric=False), 4)
    alphas = np.arange(2, MAX_ORDER + 1, dtype=np.float64)
    for s in (1, 2, 5):
        two_sided = np.maximum(both.shift_log_moments(alphas, s), both.shift_log_moments(alphas, -s))
        mirrored = one_sided.shift_log_moments(alphas, -s)
        assert np.allclose(one_sided.shift_log_moments(alphas, s), mirrored, rtol=1e-13, atol=1e-13)
        assert np.all(one_sided.shift_log_moments(alphas, s) <= two_sided + 1e-13)
        assert np.allclose(one_sided.shift_log_moments(alphas, s), two_sided, rtol=1e-9, atol=1e-12)
    kappa, tau = pmf_coefficients(noise, 4)
    kappa_both, tau_both = pmf_coefficients(replace(noise, symmetric=False), 4)
    assert np.allclose(kappa[2:], kappa_both[2:], rtol=1e-9) and tau >= tau_both


def test_a_box_on_threads_gives_what_it_gives_on_one(monkeypatch) -> None:
    from opu_hal.privacy import digitized_events

    cameras = CAMERAS[:2] + (replace(CAMERAS[1], read_noise_e=9.0),)
    monkeypatch.setattr(digitized_events, "_CORES", 1)
    digitized_events.digitized_coefficients.cache_clear()
    digitized_events.box_coefficients.cache_clear()
    alone = digitized_events.box_coefficients(cameras, 1, 3)
    monkeypatch.setattr(digitized_events, "_CORES", 3)
    digitized_events.digitized_coefficients.cache_clear()
    digitized_events.box_coefficients.cache_clear()
    threaded = digitized_events.box_coefficients(cameras, 1, 3)
    assert np.array_equal(alone[0], threaded[0]) and alone[1] == threaded[1]
