"""The per-coordinate lattice with digitized camera reads as its noise (issue 36): how many reads.

The release is :mod:`.rounding`'s (``gamma Delta = k``, unbiased randomized rounding, per-coordinate
analysis) with the Skellam counts replaced by ``K = C_1 - C_2``, two sums of ``reads`` digitized
anchor-only reads (:mod:`.digitized`, eqs. 1-3), accounted exactly by
:class:`.digitized_events.FixedSizeDigitizedNoiseEvent` over the camera's box (:mod:`.digitized_box`).

The noise level is the number of reads per count. So that the trainers' inverse accounting (a
bisection on a noise multiplier ``z``) plans it unchanged, ``z`` maps to the fewest reads whose ``K``
has std at least ``z k`` DN at every camera of the box, ``reads(z) = ceil((z k)^2 / (2 v))`` with
``v`` the smallest exact variance of one read (of :func:`.digitized.read_pmf`) over the box, capped
at ``max_reads``. ``z`` is only the dial: the event charged is the exact one at ``reads(z)``, and the
release applies exactly ``reads(z)`` reads of the device.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..contract.noise import DigitizedReadLaw
from .digitized import MAX_READS, CameraRead, read_pmf
from .digitized_bins import binned_cameras
from .digitized_box import BOX_POINTS, box_cameras
from .digitized_events import DigitizedNoiseEvent, FixedSizeDigitizedNoiseEvent, PoissonDigitizedNoiseEvent
from .events import PrivacyParameterError
from .skellam import SkellamLattice, lattice_relation


@functools.lru_cache(maxsize=1024)
def read_variance_dn2(camera: CameraRead) -> float:
    """Exact variance of one digitized read (clipping and rounding included), in DN^2."""
    pmf = read_pmf(camera)
    support = pmf.support.astype(np.float64)
    mean = float(np.sum(pmf.pmf * support))
    return float(np.sum(pmf.pmf * (support - mean) ** 2))


def low_camera(law: DigitizedReadLaw) -> CameraRead:
    """The camera at the low ends of the law's intervals."""
    return CameraRead(
        law.mean_e[0], law.read_noise_e[0], law.gain_e_per_dn, law.adc_bits, law.black_level_dn, law.full_well_e
    )


@dataclass(frozen=True)
class DigitizedLattice:
    """``lattice`` (per-coordinate analysis) whose noise is digitized reads of ``law``; ``max_reads``
    caps the reads per count planned."""

    lattice: SkellamLattice
    law: DigitizedReadLaw
    max_reads: int = MAX_READS
    box_points: int = BOX_POINTS

    def __post_init__(self) -> None:
        if not self.lattice.per_coordinate:
            raise PrivacyParameterError(
                "digitized device noise is accounted per coordinate (rounding analysis "
                f"'per-coordinate'), got {self.lattice.analysis!r}"
            )
        if not 0 < self.lattice.resolution <= 64:
            raise PrivacyParameterError(
                f"digitized device noise needs a lattice resolution k in (0, 64], got {self.lattice.resolution}"
            )
        if not (isinstance(self.max_reads, int) and 1 <= self.max_reads <= MAX_READS):
            raise PrivacyParameterError(f"max_reads must be an integer in [1, {MAX_READS}], got {self.max_reads!r}")

    @property
    def cameras(self) -> tuple[CameraRead, ...]:
        law = self.law
        if law.mean_bins:  # a speckle anchor's kept pixels: every bin's box (opu_hal.privacy.digitized_bins)
            return binned_cameras(
                low_camera(law),
                law.mean_bins,
                law.read_noise_e[1],
                self.box_points,
                gain_e_per_dn_high=law.gain_e_per_dn_high,
                black_level_dn_high=law.black_level_dn_high,
                full_well_e_high=law.full_well_e_high,
            )
        return box_cameras(
            low_camera(law),
            law.mean_e[1],
            law.read_noise_e[1],
            self.box_points,
            gain_e_per_dn_high=law.gain_e_per_dn_high,
            black_level_dn_high=law.black_level_dn_high,
            full_well_e_high=law.full_well_e_high,
        )

    @property
    def read_variance(self) -> float:
        """The smallest variance of one read over the box [DN^2]."""
        return min(read_variance_dn2(camera) for camera in self.cameras)

    def reads(self, noise_multiplier: float) -> int:
        """Fewest reads per count whose ``K`` has std >= ``z k`` DN (module docstring), in ``[1, max_reads]``."""
        if not (math.isfinite(noise_multiplier) and noise_multiplier > 0):
            raise PrivacyParameterError(f"noise multiplier must be finite and > 0, got {noise_multiplier}")
        wanted = (noise_multiplier * self.lattice.l2_sensitivity) ** 2 / (2 * self.read_variance)
        return int(min(self.max_reads, max(1, math.ceil(wanted * (1 - 1e-12)))))

    def event_for_reads(
        self, dataset_size: int, batch_size: int, reads: int, sampling: str = "fixed"
    ) -> DigitizedNoiseEvent:
        """The event of one release at ``reads`` per count: a fixed-size batch (replace-one), or with
        ``sampling="poisson"`` each example included with probability ``batch_size / dataset_size``."""
        low, law = low_camera(self.law), self.law
        fields = (
            low.mean_e,
            low.read_noise_e,
            low.gain_e_per_dn,
            low.adc_bits,
            low.black_level_dn,
            low.full_well_e,
            reads,
            self.lattice.l2_sensitivity,
            self.lattice.dimension,
        )
        box: dict[str, Any] = {
            "mean_e_high": law.mean_e[1],
            "read_noise_e_high": law.read_noise_e[1],
            "box_points": self.box_points,
            "gain_e_per_dn_high": law.gain_e_per_dn_high,
            "black_level_dn_high": law.black_level_dn_high,
            "full_well_e_high": law.full_well_e_high,
            "mean_bins": law.mean_bins,
        }
        if sampling == "poisson":
            return PoissonDigitizedNoiseEvent(*fields, **box, sampling_rate=batch_size / dataset_size)
        lattice_relation(sampling)
        return FixedSizeDigitizedNoiseEvent(*fields, **box, dataset_size=dataset_size, batch_size=batch_size)

    def event(
        self, dataset_size: int, batch_size: int, noise_multiplier: float, sampling: str = "fixed"
    ) -> DigitizedNoiseEvent:
        """The event of one release at ``reads(noise_multiplier)`` reads per count."""
        return self.event_for_reads(dataset_size, batch_size, self.reads(noise_multiplier), sampling)

    def noise_std(self, reads: int) -> float:
        """Std of ``K`` in update units at the box's least-variance camera, ``sqrt(2 reads v) / gamma``."""
        return math.sqrt(2 * reads * self.read_variance) / self.lattice.gamma


def fewest_box_reads(
    lattice: DigitizedLattice,
    dataset_size: int,
    batch_size: int,
    steps: int,
    target_epsilon: float,
    delta: float,
    trace: list[tuple[int, float]] | None = None,
    sampling: str = "fixed",
) -> tuple[int, float] | None:
    """Fewest reads per count whose run of ``steps`` box events reaches ``(target_epsilon, delta)``, and
    its epsilon (doubling from one read, then bisection: epsilon falls with the reads; the answer is
    re-checked); None if ``lattice.max_reads`` does not. ``sampling``: ``fixed`` (replace-one) or
    ``poisson`` (add/remove). Each (reads, epsilon) evaluated is appended to ``trace``."""
    from .accountant import Accountant

    def epsilon(reads: int) -> float:
        accountant = Accountant(lattice_relation(sampling))
        accountant.step(lattice.event_for_reads(dataset_size, batch_size, reads, sampling), steps)
        found = accountant.get_epsilon(delta)
        if trace is not None:
            trace.append((reads, found))
        return found

    low, high = 0, 1  # galloping up from one read: a count of many reads costs its length squared to convolve
    while epsilon(high) > target_epsilon:
        if high >= lattice.max_reads:
            return None
        low, high = high, min(2 * high, lattice.max_reads)
    while high - low > 1:  # high fits; low does not (or is 0)
        middle = (low + high) // 2
        low, high = (low, middle) if epsilon(middle) <= target_epsilon else (middle, high)
    return high, epsilon(high)
