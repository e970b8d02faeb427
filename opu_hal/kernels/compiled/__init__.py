"""CPU kernels compiled by Numba for the simulated camera: Philox counters, exact Poisson counts,
ziggurat normals and the ADC, each a few passes over a frame split over the CPU threads.

Numba compiles each kernel on first use (a few seconds; cached on disk next to these files when
they are writable). Training-quality noise of the simulated physics, never privacy noise (that
comes from :mod:`opu_hal.randomness.secure_random`).
"""

from __future__ import annotations

from contextlib import AbstractContextManager


def compute_threads() -> AbstractContextManager[None]:
    """:class:`opu_hal.kernels.compiled.philox.compute_threads`, imported when first used (so that importing
    the secure generator does not import Numba): Numba's threads follow torch's count for one draw."""
    from .philox import compute_threads as following

    return following()
