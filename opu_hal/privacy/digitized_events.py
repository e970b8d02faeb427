"""Accountant events for the lattice mechanism whose noise is digitized camera reads.

One release: every coordinate ``j`` of ``x = gamma u`` (``gamma Delta = k``, the per-coordinate
lattice of :class:`.skellam.SkellamLattice`) is randomly rounded and gets ``K_j = C_1 - C_2``, two
sums of ``reads`` anchor-only reads in DN (:mod:`.digitized`, eqs. 1-3). Its RDP is
``k^2 kappa_alpha`` (:mod:`.pmf_rdp`, (6)) of the accounted law (4), and each of the ``dimension``
noise values costs ``tau`` of total variation, charged in delta (5). A calibrated camera is a box of
intervals (``mean_e .. mean_e_high``, ``read_noise_e .. read_noise_e_high``): the event then takes the
largest curve and ``tau`` over :func:`.digitized_box.box_cameras` (a grid check, not a proof).
"""

from __future__ import annotations

import functools
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .digitized import MAX_READS, CameraRead, difference_pmf
from .digitized_bins import binned_cameras
from .digitized_box import BOX_POINTS, box_cameras
from .digitized_cache import read_box, store_if_slow
from .events import Event, Neighboring, PrivacyParameterError, _positive, is_count, register_event
from .pmf_rdp import pmf_coefficients
from .rounding import MAX_ORDER
from .subsampling import (
    PoissonSampled,
    check_fixed_batch,
    subsampled_without_replacement_rdp,
)

_CORES = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
"""Threads for a box's grid of cameras: the cores this process may use, at most 4."""


@functools.lru_cache(maxsize=1024)  # a speckle law's bins: up to a few hundred grid cameras per reads count
def digitized_coefficients(camera: CameraRead, reads: int, max_shift: int) -> tuple[np.ndarray, float]:
    """``kappa_alpha`` (``alpha = 0 .. MAX_ORDER``) and ``tau`` of ``K`` for ``reads`` reads per count."""
    return pmf_coefficients(difference_pmf(camera, reads), max_shift)


@functools.lru_cache(maxsize=64)  # asked again at every epsilon query (the coupling's tau): no pool then
def box_coefficients(cameras: tuple[CameraRead, ...], reads: int, max_shift: int) -> tuple[np.ndarray, float]:
    """The largest ``kappa_alpha`` (every order, read-only) and ``tau`` over ``cameras`` (:mod:`.digitized_box`),
    the cameras' laws computed on one thread per core (numpy and scipy release the lock in their loops)."""

    stored = read_box(cameras, reads, max_shift)  # kept on disk where it took long (:mod:`.digitized_cache`)
    if stored is not None:
        return stored
    start = time.perf_counter()

    def coefficients(camera: CameraRead) -> tuple[np.ndarray, float]:
        return digitized_coefficients(camera, reads, max_shift)

    workers = min(len(cameras), _CORES)
    if workers > 1:
        with ThreadPoolExecutor(workers) as pool:
            found = list(pool.map(coefficients, cameras))
    else:
        found = [coefficients(camera) for camera in cameras]
    kappa = np.max([kappa for kappa, _ in found], axis=0)
    kappa.setflags(write=False)
    tau = max(tau for _, tau in found)
    store_if_slow(cameras, reads, max_shift, kappa, tau, time.perf_counter() - start)
    return kappa, tau


def digitized_rdp(orders: np.ndarray, cameras: tuple[CameraRead, ...], reads: int, l2_sensitivity: float) -> np.ndarray:
    """``c^2 kappa_alpha`` (:mod:`.pmf_rdp` (6)), largest over ``cameras``; inf at non-integer orders and
    above ``MAX_ORDER``."""
    kappa, _ = box_coefficients(cameras, reads, int(math.floor(l2_sensitivity)))
    orders = np.asarray(orders, dtype=np.float64)
    out = np.full(orders.shape, np.inf)
    for index, alpha in np.ndenumerate(orders):
        if alpha == math.floor(alpha) and 2 <= alpha <= MAX_ORDER:
            out[index] = l2_sensitivity**2 * kappa[int(alpha)]
    return out


@dataclass(frozen=True)
class DigitizedNoiseEvent(Event):
    """One release of ``dimension`` coordinates, noise ``K`` from ``reads`` digitized reads per count
    of the camera (:class:`.digitized.CameraRead` fields, at the low ends of their intervals);
    ``l2_sensitivity`` is ``gamma Delta`` in DN under the accountant's relation. ``mean_e_high`` and
    ``read_noise_e_high`` (default: equal to the low ends) close a calibrated box, checked on a grid of
    ``box_points`` per axis (:mod:`.digitized_box`); ``gain_e_per_dn_high``, ``black_level_dn_high`` and
    ``full_well_e_high`` close it on the calibrated gain, black level and full well. ``mean_bins`` (a
    speckle anchor's kept pixels, :mod:`.digitized_bins`): one mean interval per bin, each boxed on its own
    grid and the largest curve over all of them charged."""

    mean_e: float
    read_noise_e: float
    gain_e_per_dn: float
    adc_bits: int
    black_level_dn: float
    full_well_e: float
    reads: int
    l2_sensitivity: float
    dimension: int
    mean_e_high: float | None = None
    read_noise_e_high: float | None = None
    box_points: int = BOX_POINTS
    gain_e_per_dn_high: float | None = None
    black_level_dn_high: float | None = None
    full_well_e_high: float | None = None
    mean_bins: tuple[tuple[float, float], ...] = ()
    kind: ClassVar[str] = "digitized_noise"
    relations: ClassVar[tuple[str, ...]] = ("add_remove", "replace_one")

    def __post_init__(self) -> None:
        # a ledger restores the bins as lists: back to the hashable tuples the curve caches key on
        object.__setattr__(self, "mean_bins", tuple((float(lo), float(hi)) for lo, hi in self.mean_bins))
        _ = self.camera  # validates the camera fields
        if not (is_count(self.reads) and 1 <= self.reads <= MAX_READS):
            raise PrivacyParameterError(f"reads must be an integer in [1, {MAX_READS}], got {self.reads!r}")
        if not (is_count(self.dimension) and self.dimension >= 1):
            raise PrivacyParameterError(f"dimension must be an integer >= 1, got {self.dimension!r}")
        _positive("l2_sensitivity", self.l2_sensitivity, 64.0)
        _ = self.cameras  # validates the box

    @property
    def camera(self) -> CameraRead:
        return CameraRead(
            self.mean_e, self.read_noise_e, self.gain_e_per_dn, self.adc_bits, self.black_level_dn, self.full_well_e
        )

    @property
    def cameras(self) -> tuple[CameraRead, ...]:
        """The grid of the calibrated box (one camera when the box is a point)."""
        high_mean = self.mean_e if self.mean_e_high is None else self.mean_e_high
        high_noise = self.read_noise_e if self.read_noise_e_high is None else self.read_noise_e_high
        if self.mean_bins:
            return binned_cameras(
                self.camera,
                self.mean_bins,
                high_noise,
                self.box_points,
                gain_e_per_dn_high=self.gain_e_per_dn_high,
                black_level_dn_high=self.black_level_dn_high,
                full_well_e_high=self.full_well_e_high,
            )
        return box_cameras(
            self.camera,
            high_mean,
            high_noise,
            self.box_points,
            gain_e_per_dn_high=self.gain_e_per_dn_high,
            black_level_dn_high=self.black_level_dn_high,
            full_well_e_high=self.full_well_e_high,
        )

    def base_rdp(self, orders: np.ndarray) -> np.ndarray:
        return digitized_rdp(orders, self.cameras, self.reads, self.l2_sensitivity)

    def rdp(self, orders: np.ndarray, neighboring: Neighboring) -> np.ndarray:
        return self.base_rdp(orders)

    def total_variation(self) -> float:
        """``dimension tau``: every coordinate's noise value is coupled with the accounted law (5)."""
        _, tau = box_coefficients(self.cameras, self.reads, int(math.floor(self.l2_sensitivity)))
        return self.dimension * tau


@dataclass(frozen=True)
class FixedSizeDigitizedNoiseEvent(DigitizedNoiseEvent):
    """:class:`DigitizedNoiseEvent` on a batch of ``batch_size`` drawn without replacement from
    ``dataset_size`` (replace-one; Wang, Balle and Kasiviswanathan 2019, Theorem 9), as DP-DFA uses it."""

    dataset_size: int = 1
    batch_size: int = 1
    kind: ClassVar[str] = "fixed_size_digitized_noise"
    relations: ClassVar[tuple[str, ...]] = ("replace_one",)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_fixed_batch(self.dataset_size, self.batch_size)

    def rdp(self, orders: np.ndarray, neighboring: Neighboring) -> np.ndarray:
        return subsampled_without_replacement_rdp(self.base_rdp, self.batch_size / self.dataset_size, orders)


@dataclass(frozen=True)
class PoissonDigitizedNoiseEvent(PoissonSampled, DigitizedNoiseEvent):
    """:class:`DigitizedNoiseEvent` on a batch in which every example is included with probability
    ``sampling_rate`` (add/remove; Zhu and Wang 2019, Theorem 6), as DP-DFA with ``--sampling poisson``
    uses it. The total variation (5) is charged in full at every step (not amplified)."""

    kind: ClassVar[str] = "poisson_digitized_noise"


for _cls in (DigitizedNoiseEvent, FixedSizeDigitizedNoiseEvent, PoissonDigitizedNoiseEvent):
    register_event(_cls)
