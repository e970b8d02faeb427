"""Seconds of the digitized box accounting at the main job's scale (12-bit camera near 1 e-/DN, k = 23):
one camera's kappa curve (orders 2 to 64) by the per-order reference (one logsumexp per order and shift,
as before) and by the vectorised :func:`opu_hal.privacy.pmf_rdp.pmf_coefficients`, in the same run, and
the box event of a flat-beam calibration's law (every grid camera) when ``--calibration`` is given.

    python -m benchmarks.digitized_box_speed [--profile P --calibration CAL]

Goal: the vectorised curve >= 3x faster than the reference, and equal to it (1e-12 relative).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from opu_hal.privacy.digitized import CameraRead, difference_pmf
from opu_hal.privacy.pmf_rdp import AccountedPMF, _far, _near, pmf_coefficients
from opu_hal.privacy.rounding import MAX_ORDER

CAMERA = CameraRead(1346.0, 2.3, 0.9879, 12, 63.95, 10000.0)  # the main job's calibrated box, low ends
SHIFT = 23  # floor(k) at k = 23
GOAL_RATIO = 3.0


def reference_coefficients(model: AccountedPMF, max_shift: int) -> np.ndarray:
    """The per-order loop: ``kappa_alpha`` with one scalar shift moment per order and shift."""
    terms = model.near_terms()
    kappa = np.full(MAX_ORDER + 1, np.inf)
    for alpha in range(2, MAX_ORDER + 1):
        shift_rdp = np.zeros(max_shift + 2)
        for s in range(1, max_shift + 2):
            moment = max(model.integer_shift_log_moment(alpha, s), model.integer_shift_log_moment(alpha, -s))
            shift_rdp[s] = max(moment, 0.0) / (alpha - 1)
        kappa[alpha] = max(_near(alpha, terms), _far(alpha, shift_rdp))
    return kappa


def curve_seconds() -> tuple[float, float, float]:
    """(reference s, vectorised s, largest relative difference) for one camera's curve."""
    noise = difference_pmf(CAMERA, 1)
    start = time.perf_counter()
    slow = reference_coefficients(AccountedPMF(noise, SHIFT), SHIFT)
    middle = time.perf_counter()
    fast, _ = pmf_coefficients(noise, SHIFT)
    end = time.perf_counter()
    orders = slice(2, MAX_ORDER + 1)
    return middle - start, end - middle, float(np.max(np.abs(fast[orders] / slow[orders] - 1)))


def box_seconds(profile: str, calibration: str) -> str:
    """The box event of the calibrated law at the main job's shape, one read per count."""
    import opu_hal
    from opu_hal.calibration.calibrated import load_calibrated_noise
    from opu_hal.privacy import Accountant
    from opu_hal.privacy.digitized_lattice import DigitizedLattice
    from opu_hal.privacy.skellam import SkellamLattice

    loaded = opu_hal.load_profile(profile)
    device = opu_hal.load_device(loaded)
    device.attach_calibration(load_calibrated_noise(calibration, loaded))
    lattice = DigitizedLattice(SkellamLattice(1018890, 1.0, 23.0, "per-coordinate"), device.digitized_read_law())
    start = time.perf_counter()
    accountant = Accountant("replace_one")
    accountant.step(lattice.event_for_reads(54000, 2048, 1), 520)
    found = accountant.get_epsilon(1e-5)
    return f"box of {len(lattice.cameras)} cameras, 1 read per count, 520 steps: epsilon {found:.4g} in {time.perf_counter() - start:.1f} s"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile")
    parser.add_argument("--calibration")
    args = parser.parse_args()
    slow, fast, diff = curve_seconds()
    ratio = slow / fast if fast > 0 else math.inf
    print(
        f"one camera's kappa curve: reference {slow:.3f} s, vectorised {fast:.3f} s ({ratio:.1f}x); largest relative difference {diff:.2g}"
    )
    print(
        f"goal >= {GOAL_RATIO:g}x and equal to 1e-12: {'met' if ratio >= GOAL_RATIO and diff <= 1e-12 else 'NOT met'}"
    )
    if args.profile and args.calibration:
        print(box_seconds(args.profile, args.calibration))


if __name__ == "__main__":
    main()
