"""CPU kernels compiled by Numba for the simulated camera: Philox counters, exact Poisson counts,
ziggurat normals and the ADC, each a few passes over a frame split over the CPU threads.

Numba compiles each kernel on first use (a few seconds; cached on disk next to these files when
they are writable). Training-quality noise of the simulated physics, never privacy noise (that
comes from :mod:`opu_hal.randomness.secure_random`).
"""

from __future__ import annotations

from contextlib import AbstractContextManager


def compute_threads() -> AbstractContextManager[None]:
    """Numba's threads follow torch's intra-op count for one compiled draw
    (:class:`opu_hal.kernels.compiled.philox.compute_threads`). Two runs of one torch thread each on a
    2-core machine (the reproduction scripts' ``PARALLEL=2``) otherwise launch two Numba threads each,
    and each parallel draw waits for a core the other run holds: an epoch measured 135-148 s, against
    2.1-2.7 s with the threads following torch's."""
    from .philox import compute_threads as following

    return following()
