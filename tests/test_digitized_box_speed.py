"""The fast digitized box accounting computes what the per-order reference computes: every order's shift
moment at once, and the fewest reads found by doubling then bisection."""

from __future__ import annotations

import numpy as np
import pytest

from opu_hal.contract.noise import DigitizedReadLaw
from opu_hal.privacy import Accountant
from opu_hal.privacy.digitized import CameraRead, difference_pmf
from opu_hal.privacy.digitized_lattice import DigitizedLattice, fewest_box_reads
from opu_hal.privacy.pmf_rdp import AccountedPMF
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
