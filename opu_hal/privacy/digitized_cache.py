"""The digitized box's curves (:func:`.digitized_events.box_coefficients`) kept on disk where one takes
long to compute: a calibrated box is a grid of up to a few hundred cameras, each camera's law a sum over
its reads' bins (the main job's box: 5.7 s on the 2-core machine), and every run on the same calibration
asks for the same curve.

An entry is keyed on every input of the computation: each camera of the grid (its fields' exact floats),
the reads per count, the largest shift, the source of the modules that compute the laws and the curve,
and the numpy and scipy versions. It holds the orders ``2 .. MAX_ORDER`` (orders 0 and 1 are infinite by
construction, :func:`.pmf_rdp.pmf_coefficients`) and is read back only under that key, and only as a full
curve of finite non-negative numbers with a finite non-negative ``tau``; a curve with an infinite order
from 2 up is never stored (it is recomputed each time). A cache that cannot be read or written costs
time, never a bound (:mod:`opu_hal.runtime.cache`); ``tests/test_digitized_cache.py`` checks that a stored
curve equals the direct computation.
"""

from __future__ import annotations

import math

import numpy as np
import scipy

from ..runtime.cache import cache_key, read_entry, write_entry
from .digitized import CameraRead
from .kappa_cache import source_digest
from .rounding import MAX_ORDER

CACHE_FOLDER = "digitized-box"
#: A curve is stored when computing it took longer than this (s); shorter ones are recomputed.
STORE_AFTER_S = 0.5
#: The modules whose source the curve depends on: the read's law, the curve from a law, the box's grid.
COMPUTING_MODULES = ("opu_hal.privacy.digitized", "opu_hal.privacy.pmf_rdp", "opu_hal.privacy.digitized_events")


def box_key(cameras: tuple[CameraRead, ...], reads: int, max_shift: int) -> str:
    """The key of the box curve of ``cameras`` at ``reads`` reads per count and shifts up to ``max_shift``."""
    digests = tuple(source_digest(name) for name in COMPUTING_MODULES)
    return cache_key(
        "digitized-box", repr(cameras), int(reads), int(max_shift), digests, np.__version__, scipy.__version__
    )


def _usable(values: list[float], tau: float) -> bool:
    finite = all(isinstance(v, float) and math.isfinite(v) and v >= 0 for v in values)
    return finite and math.isfinite(tau) and tau >= 0


def read_box(cameras: tuple[CameraRead, ...], reads: int, max_shift: int) -> tuple[np.ndarray, float] | None:
    """The stored ``(kappa, tau)`` (kappa read-only, orders ``0 .. MAX_ORDER``), or None when absent or
    malformed."""
    stored = read_entry(CACHE_FOLDER, box_key(cameras, reads, max_shift))
    if not isinstance(stored, dict) or not isinstance(stored.get("from_2"), list):
        return None
    values, tau = stored["from_2"], stored.get("tau")
    if not isinstance(tau, float) or len(values) != MAX_ORDER - 1 or not _usable(values, tau):
        return None
    kappa = np.array([math.inf, math.inf, *values], dtype=np.float64)
    kappa.setflags(write=False)
    return kappa, tau


def write_box(cameras: tuple[CameraRead, ...], reads: int, max_shift: int, kappa: np.ndarray, tau: float) -> None:
    """Store ``(kappa, tau)`` under :func:`box_key` when orders 0 and 1 are infinite and the rest, and
    ``tau``, finite and non-negative (else nothing is stored)."""
    values = [float(v) for v in kappa[2:]]
    shaped = len(kappa) == MAX_ORDER + 1 and math.isinf(kappa[0]) and math.isinf(kappa[1])
    if shaped and _usable(values, float(tau)):
        write_entry(CACHE_FOLDER, box_key(cameras, reads, max_shift), {"from_2": values, "tau": float(tau)})


def store_if_slow(
    cameras: tuple[CameraRead, ...], reads: int, max_shift: int, kappa: np.ndarray, tau: float, seconds: float
) -> None:
    """:func:`write_box` when the curve took longer than :data:`STORE_AFTER_S` to compute."""
    if seconds > STORE_AFTER_S:
        write_box(cameras, reads, max_shift, kappa, tau)
