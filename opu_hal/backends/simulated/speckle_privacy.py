"""Skellam privacy counts from a speckle anchor, each drawn at its own pixels' true means, planned
with a per-pixel bound map (:mod:`opu_hal.contract.anchor_map`), and a drift watch.

Per draw of ``n`` values: the kept pixels and reads per count come from :func:`select_pixels` on the
bound map (the calibration's, or without one the model's own means); value ``i``'s two counts read
the same ``r`` kept pixels in two frames, so each is ``Poisson(Lambda_i)`` with ``Lambda_i`` the sum of
those pixels' true means, and ``C_1 - C_2`` a zero-mean Skellam, drawn from the secure generator. The
accounted mean is ``r min_kept b_j``; a draw where some kept pixel's true mean is below its bound is
refused (the simulation knows its truth; the drift watch is the check a real device has).

Drift watch: every ``anchor_check_every`` draws (the first included), one anchor frame is read at
the kept pixels and tested against the bounds (:func:`~opu_hal.contract.anchor_map.drift_test`, level
1e-6 per check); a failure raises :class:`~opu_hal.contract.errors.AnchorDrift` before the draw.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ...contract.anchor_map import (
    AnchorBoundMap,
    DriftCheck,
    PixelSelection,
    clip_ceiling_e,
    drift_test,
    select_pixels,
)
from ...contract.errors import AnchorDrift, DeviceUnavailable
from ...contract.noise import NoiseDistribution, PrivacyCounts
from ...contract.speckle_bins import BinnedSelection, select_band, select_binned
from ...randomness.secure_random import SecureGenerator
from .camera import Sensor
from .privacy_noise import CLIP_LIMIT, clip_probability
from .speckle import SpeckleAnchor

MODEL_SOURCE = "model (the profile's declared camera: its own per-pixel means)"


@functools.lru_cache(maxsize=64)
def sensor_ceiling_e(sensor: Sensor) -> float:
    """The largest read mean that clips with probability at most :data:`CLIP_LIMIT` on ``sensor``."""
    bottom = -sensor.black_level_dn * sensor.gain_e_per_dn
    return clip_ceiling_e(float(sensor.saturation_e), bottom, sensor.read_noise_e, CLIP_LIMIT)


def model_bounds(means_e: np.ndarray) -> AnchorBoundMap:
    """The model's own means as a (degenerate) bound map: what an uncalibrated simulation plans with."""
    return AnchorBoundMap(means_e, means_e, means_e, confidence=0.5, frames=0, source=MODEL_SOURCE)


@dataclass(frozen=True)
class ValueMeans:
    """The hidden-truth means a digitized draw reads, for one selection and draw size: each value's pixel
    mean (``values``), the same repeated for the ``2 reads`` reads of its two counts (``per_read``), their
    mean and minimum, the kept pixels' largest mean and how many kept pixels lie outside their bounds."""

    values: np.ndarray
    per_read: np.ndarray
    mean: float
    minimum: float
    kept_max: float
    kept_outside: int


def value_means(
    selection: BinnedSelection, bounds: AnchorBoundMap, means_e: np.ndarray, n_values: int, reads: int
) -> ValueMeans:
    """:class:`ValueMeans` of ``means_e`` (read-only arrays)."""
    truth = means_e[selection.kept]
    inside = (truth >= bounds.lower_e[selection.kept]) & (truth <= bounds.upper_e[selection.kept])  # NaN: outside
    values = means_e[selection.value_pixels(n_values)]
    per_read = np.repeat(values, 2 * reads)
    values.flags.writeable = per_read.flags.writeable = False
    outside = int(np.count_nonzero(~inside))
    return ValueMeans(values, per_read, float(values.mean()), float(values.min()), float(truth.max()), outside)


#: What a draw's hidden-truth means are computed from: objects compared by identity (the selection, the
#: bounds, the anchor's read-only means), then plain values (the draw size, the reads).
DrawKey = tuple[tuple[Any, ...], tuple[int, ...]]


def _same_draw(last: DrawKey, key: DrawKey, means_e: np.ndarray) -> bool:
    """Whether what was computed for ``last`` holds for ``key``: the same objects, the same values, and
    means that cannot have changed in place (read-only)."""
    same_objects = len(last[0]) == len(key[0]) and all(a is b for a, b in zip(last[0], key[0]))
    return same_objects and last[1] == key[1] and not means_e.flags.writeable


class SpecklePrivacy:
    """The speckle anchor's privacy draws and drift checks of one device."""

    def __init__(
        self, anchor: SpeckleAnchor, label: str, check_every: int, max_overshoot: float, band: float | None = None
    ) -> None:
        self.anchor, self.label, self.check_every, self.max_overshoot = anchor, label, check_every, max_overshoot
        self.band = band  # digitized counts: one band of pixels [t, band t] (select_band), or bins (None)
        self.draws = 0
        self.checks: list[DriftCheck] = []
        self._selection: tuple[AnchorBoundMap, float, float, PixelSelection] | None = None
        self._model: tuple[np.ndarray, AnchorBoundMap] | None = None
        self._count_means: tuple[DrawKey, np.ndarray] | None = None
        self._binned: tuple[AnchorBoundMap, float, int | None, BinnedSelection] | None = None
        self.values_per_draw: int | None = None  # digitized counts: the threshold is chosen for draws of this size
        self._value_means: tuple[DrawKey, ValueMeans] | None = None

    def value_means(
        self, selection: BinnedSelection, bounds: AnchorBoundMap, means_e: np.ndarray, n_values: int, reads: int
    ) -> ValueMeans:
        """:func:`value_means`, kept while the selection, the bounds, the (read-only) means, the draw size and
        the reads stay the same: a draw of a million values would otherwise recompute them (milliseconds)."""
        key = ((selection, bounds, means_e), (n_values, reads))
        last = self._value_means
        if last is None or not _same_draw(last[0], key, means_e):
            self._value_means = last = (key, value_means(selection, bounds, means_e, n_values, reads))
        return last[1]

    def uncalibrated_bounds(self, means_e: np.ndarray) -> AnchorBoundMap:
        """:func:`model_bounds` of ``means_e``, the same object while the means stay the same, so that
        the pixel selection planned on it is reused from draw to draw (it costs seconds per plan)."""
        last = self._model  # the anchor's means are one read-only array while they stay the same
        if last is None or (last[0] is not means_e and not np.array_equal(last[0], means_e)):
            self._model = last = (means_e if not means_e.flags.writeable else means_e.copy(), model_bounds(means_e))
        return last[1]

    def count_means(self, chosen: PixelSelection, means_e: np.ndarray, n_values: int) -> np.ndarray:
        """:meth:`PixelSelection.count_means`, kept while the selection, the (read-only) means and the
        draw size stay the same: a draw of a million values would otherwise recompute them (milliseconds)."""
        key = ((chosen, means_e), (n_values,))
        last = self._count_means
        if last is None or not _same_draw(last[0], key, means_e):
            lam = chosen.count_means(means_e, n_values)
            lam.flags.writeable = False
            self._count_means = last = (key, lam)
        return last[1]

    def selection(self, bounds: AnchorBoundMap, poisson_mean: float, ceiling_e: float) -> PixelSelection:
        last = self._selection  # keyed on the map object itself (held), not its id: an id can be reused
        if last is None or last[0] is not bounds or last[1:3] != (poisson_mean, ceiling_e):
            try:
                chosen = select_pixels(bounds, poisson_mean, ceiling_e, self.max_overshoot)
            except ValueError as exc:
                raise DeviceUnavailable(f"profile {self.label!r}: {exc}") from None
            self._selection = last = (bounds, poisson_mean, ceiling_e, chosen)
        return last[3]

    def binned_selection(self, bounds: AnchorBoundMap, ceiling_e: float) -> BinnedSelection:
        """The kept pixels and mean bins of digitized speckle counts (:func:`select_binned`; one band,
        :func:`select_band`, where the profile sets ``speckle_band`` and the draw size is known), per bound map."""
        last, values = self._binned, self.values_per_draw
        if last is None or last[0] is not bounds or last[1:3] != (ceiling_e, values):
            try:
                if self.band is not None and values is not None:
                    chosen = select_band(bounds, ceiling_e, self.band, values)
                else:
                    chosen = select_binned(bounds, ceiling_e, values=values)
            except ValueError as exc:
                raise DeviceUnavailable(f"profile {self.label!r}: {exc}") from None
            self._binned = last = (bounds, ceiling_e, values, chosen)
        return last[3]

    def watch(self, means_e: np.ndarray, bounds: AnchorBoundMap, kept: np.ndarray, sensor: Sensor, camera) -> None:
        """Re-read the anchor at the cadence; raise :class:`AnchorDrift` when a read falls below the bounds."""
        if self.draws % self.check_every:
            return
        frame = next(self.anchor.frames_dn(means_e, sensor, 1, camera))
        reads = (frame[kept] - sensor.black_level_dn) * sensor.gain_e_per_dn
        check = drift_test(reads, bounds.lower_e[kept], sensor.read_noise_e, self.draws)
        self.checks.append(check)
        if not check.passed:
            raise AnchorDrift(
                f"profile {self.label!r}: the speckle anchor fell below its calibrated bounds at draw {self.draws} "
                f"(pooled z = {check.z_pooled:.3g}, {check.pixels_below} of {kept.size} kept pixels below their "
                f"margin; level {check.alpha:g}); checks made: {len(self.checks)}, one every {self.check_every} "
                "draws. The run stops before this draw (the steps drawn so far are charged): re-run `opu-hal "
                "calibrate`, then resume from the checkpoint"
            )

    def draw(
        self,
        generator: SecureGenerator,
        sensor: Sensor,
        bounds: AnchorBoundMap,
        means_e: np.ndarray,
        n_values: int,
        poisson_mean: float,
        frame_s: float,
        camera: torch.Generator,
        ceiling_e: float | None = None,
    ) -> PrivacyCounts:
        """``n_values`` Skellam values of Poisson mean ``>= poisson_mean`` (module docstring); pixels are kept
        below ``ceiling_e`` (the calibration's clip ceiling; default the sensor's)."""
        if not (math.isfinite(poisson_mean) and poisson_mean > 0):
            raise DeviceUnavailable(f"requested Poisson mean must be finite and > 0, got {poisson_mean}")
        if bounds.pixels != means_e.size:
            raise DeviceUnavailable(
                f"profile {self.label!r}: the anchor map has {bounds.pixels} pixels, the sensor {means_e.size}"
            )
        ceiling = sensor_ceiling_e(sensor) if ceiling_e is None else ceiling_e
        chosen = self.selection(bounds, poisson_mean, ceiling)
        self.watch(means_e, bounds, chosen.kept, sensor, camera)
        truth = means_e[chosen.kept]
        if not (truth >= bounds.lower_e[chosen.kept]).all() or truth.max() > sensor_ceiling_e(sensor):
            raise DeviceUnavailable(
                f"profile {self.label!r}: a kept pixel's true anchor mean lies below its bound or above the clip "
                f"ceiling {sensor_ceiling_e(sensor):.4g} e- ({bounds.source}); re-run `opu-hal calibrate`"
            )
        lam = self.count_means(chosen, means_e, n_values)
        counts = generator.poisson_at(lam) - generator.poisson_at(lam)
        reads = chosen.reads_per_count
        if sensor.read_noise_e > 0:
            std = math.sqrt(2 * reads * (sensor.read_noise_e**2 + 1 / 12))
            counts += np.rint(std * generator.standard_normal(n_values).numpy()).astype(np.int64)
        self.draws += 1
        frames = chosen.frames(n_values)
        distribution = NoiseDistribution(
            kind="poisson-counts",
            generator=generator.name,
            poisson_mean=float(lam.mean()),
            poisson_mean_lower=chosen.accounted_mean,
            reads_per_value=reads,
            read_noise_e=sensor.read_noise_e,
            gain_e_per_dn=sensor.gain_e_per_dn,
            lattice_step=1.0,
            clip_probability=clip_probability(float(truth.max()), sensor),
            mean_source=bounds.source,
            frames=frames,
            camera_seconds=frames * frame_s,
            kept_pixels=chosen.kept_pixels,
            anchor_checks=len(self.checks),
            anchor_check_every=self.check_every,
        )
        return PrivacyCounts(counts=torch.from_numpy(counts), distribution=distribution)
