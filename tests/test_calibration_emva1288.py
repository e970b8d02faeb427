"""Issue 36's outside oracle: the photon-transfer estimator against the EMVA 1288 reference code
(``emva1288`` 1.0.2, a dev dependency) on datasets from emva1288's own camera simulator.

Three cameras (:data:`benchmarks.emva_reference.CAMERAS`: 8 bits with the gain emva1288 picks,
10 bits at 0.3 DN/e-, both ADC-limited; 12 bits at 0.1665 DN/e-, full-well limited), 100-step exposure-variation
sweeps (one radiance, a dark series per exposure), 32x32 pixels. The same image files go through
emva1288's ParseEmvaDescriptorFile / LoadImageData / Data1288 / Results1288 and through
:func:`opu_hal.calibration.emva_sweep.acquisition_from_sweep` + ``photon_transfer.estimate``.

Definitions that differ, and what is compared:
- **Saturation point.** The standard puts it at the largest temporal variance (ours:
  ``np.argmax``). emva1288 walks back from the brightest level and stops at the first local
  maximum: on an ADC-limited camera the same level, on a full-well plateau (variance down to the
  dither's, with noise) a level on the plateau. Every quantity is compared with emva1288 forced to
  the largest variance (``Results1288(index_u_ysat=argmax)``); against emva1288's own index too
  where the two indices agree; the 12-bit camera's difference is checked for what it is.
- **Clip level.** Ours is where the signal stops (ADC top or full well, from the black level);
  emva1288 has none: it is checked against the simulator's truth only.
- **Read noise** is EMVA's sigma_d at zero exposure: the dark variance's intercept against the
  exposure, 1/12 DN^2 removed. The simulator dithers by a uniform 1 DN before rounding, which adds
  1/12 DN^2 beyond the rounding; its truth is therefore ``sqrt(sigma2_dark_0 + 1/(12 K^2))``.
- **Variance.** emva1288 removes the two frames' mean difference (``- (mu_A - mu_B)^2 / 2``), ours
  is the per-pixel variance: about 0.1 % on the gain, and through it on every quantity in e-.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("emva1288")
pytest.importorskip("lxml")

from benchmarks.emva_reference import CAMERAS, compare, rows
from opu_hal.calibration.emva_sweep import acquisition_from_sweep
from opu_hal.calibration.photon_transfer import estimate
from opu_hal.contract.errors import CalibrationError

TOLERANCE = 0.02  # issue 36: agreement with the EMVA 1288 reference within 2 %
STEPS = 100


@pytest.fixture(scope="module")
def comparisons():
    return {bits: compare(bits, steps=STEPS, size=32, bootstrap=300) for bits in CAMERAS}


def test_within_two_percent_of_emva1288_at_the_largest_variance(comparisons):
    for bits, c in comparisons.items():
        assert c.reference_at_argmax.index_u_ysat == int(np.argmax(c.reference.temporal["s2_y"]))
        assert c.reference_at_argmax.index_u_ysat >= 50  # EMVA 1288: >= 50 levels up to saturation
        for name, _, reference, ours, _ in rows(c)[:5]:
            assert abs(ours.value / reference - 1) < TOLERANCE, (bits, name, ours.value, reference)


def test_within_two_percent_of_emva1288_own_processing_on_adc_limited_cameras(comparisons):
    """On the ADC-limited cameras emva1288's walk-back stops at the largest variance: its own
    results, unmodified, agree within 2 %."""
    for bits in (8, 10):
        c = comparisons[bits]
        assert c.truth["limited_by"] == "adc" and c.ours.saturation_limited_by == "adc"
        assert c.reference.index_u_ysat == c.reference_at_argmax.index_u_ysat
        for name, own, _, ours, _ in rows(c)[:5]:
            assert abs(ours.value / own - 1) < TOLERANCE, (bits, name, ours.value, own)


def test_emva1288_walks_back_onto_a_full_well_plateau(comparisons):
    """The 12-bit camera clips at its full well (20000 e-, below 4095 DN at 0.1665 DN/e-):
    emva1288's own saturation index lands on the plateau, past the largest variance, and its
    saturation point (eta mu_p at that index) exceeds the full well, which no signal can; ours, at
    the largest variance, lies below the clip level, which ours identifies as the full well."""
    c = comparisons[12]
    assert c.truth["limited_by"] == "full_well" and c.ours.saturation_limited_by == "full_well"
    assert c.reference.index_u_ysat > c.reference_at_argmax.index_u_ysat + 5
    assert c.reference.u_e_sat > c.ours.saturation.upper
    assert c.ours.saturation_point.upper < c.ours.saturation.value


def test_our_intervals_cover_the_simulators_truth(comparisons):
    """Gain, read noise, dark current, QE and clip level of the three cameras against the values
    the simulator was built with: every error < 5 %, and each quantity's 95 % interval covers the
    truth on two cameras of three at least (the quantities in e- share the gain's bootstrap draws,
    so one camera's unlucky gain takes them along: with the 12-bit camera's first seed, 12, its
    gain came out -1.7 % (2.2 sigma) and four of its five intervals missed; these fixed draws cannot
    measure a rate, ``python -m benchmarks.emva_reference --seeds 10`` does: 27-29 of 30)."""
    missed: dict[str, list[int]] = {}
    for bits, c in comparisons.items():
        for name, _, _, ours, truth in rows(c):
            if truth is None:
                continue
            assert abs(ours.value / truth - 1) < 0.05, (bits, name, ours.value, truth)
            missed.setdefault(name, [])
            if not ours.lower <= truth <= ours.upper:
                missed[name].append(bits)
    assert len(missed) == 5
    assert all(len(cameras) <= 1 for cameras in missed.values()), missed


def test_a_sweep_level_without_its_dark_is_refused():
    frames = np.full((2, 4, 4), 10, dtype=np.uint16)
    with pytest.raises(CalibrationError, match="needs a dark series"):
        acquisition_from_sweep({500.0: {0.0: frames, 100.0: frames}, 1000.0: {200.0: frames}}, max_dn=255)


def test_a_sweep_that_stops_short_of_saturation_is_refused(comparisons):
    """The plateau check is the estimator's own: the 8-bit sweep cut before its ADC top (the last
    levels neither clipped nor flat) gets no clip level."""
    c = comparisons[8]
    acq = c.acquisition
    keep = int(np.argmax([(s.var - d.var).mean() for s, d in zip(acq.ptc, acq.level_darks())])) - 10
    short = dataclasses.replace(acq, ptc=acq.ptc[:keep], ptc_darks=acq.ptc_darks[:keep])
    with pytest.raises(CalibrationError, match="not a plateau"):
        estimate(short, bootstrap=50)
