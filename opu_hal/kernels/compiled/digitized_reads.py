"""Digitized privacy counts from electron counts and read-noise normals, in one compiled pass: the ADC
of :func:`opu_hal.backends.simulated.speckle_digitized.pixel_counts` (full well, read noise, gain,
rounding, black level, ADC range; eq. 1 of :mod:`opu_hal.privacy.digitized`) and the difference of each
value's two summed counts, with no temporary array per step of it (numpy's form makes eight)."""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(inline="always", cache=True)
def _read_dn(electrons, normal, full_well_e, read_noise_e, gain, black_dn, max_dn):
    """One read in DN: ``clip(rint(min(e, full well) + sigma z) / g) + black, 0, max)``, numpy's operations
    in numpy's order (so the same float64 values)."""
    signal = min(np.float64(electrons), full_well_e) + read_noise_e * np.float64(normal)
    return np.int64(min(max(np.rint(signal / gain) + black_dn, 0.0), max_dn))


@njit(parallel=True, cache=True)
def count_differences(electrons, normals, reads, full_well_e, read_noise_e, gain, black_dn, max_dn, out):
    """``out[v]``: the sum of reads ``2 v reads .. (2 v + 1) reads - 1`` in DN less the sum of the next ``reads``
    (``electrons`` int64, ``normals`` float32, both ``2 reads len(out)`` long)."""
    for v in prange(out.shape[0]):
        difference = np.int64(0)
        for r in range(reads):
            first, second = 2 * v * reads + r, (2 * v + 1) * reads + r
            difference += _read_dn(electrons[first], normals[first], full_well_e, read_noise_e, gain, black_dn, max_dn)
            difference -= _read_dn(
                electrons[second], normals[second], full_well_e, read_noise_e, gain, black_dn, max_dn
            )
        out[v] = difference
