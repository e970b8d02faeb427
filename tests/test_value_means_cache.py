"""The hidden-truth means a digitized speckle draw reads are computed once per selection and reused
while the (read-only) anchor means stay the same object; a change of the means is always seen."""

from types import SimpleNamespace

import numpy as np

from opu_hal.backends.simulated.speckle_privacy import SpecklePrivacy
from opu_hal.contract.speckle_bins import BinnedSelection


def _inputs(means: np.ndarray):
    selection = BinnedSelection(kept=np.array([1, 3, 4]), bins=((0.0, 1.0),), threshold_e=0.0, ceiling_e=1e9, ratio=2)
    bounds = SimpleNamespace(lower_e=means - 1.0, upper_e=means + 1.0)
    return selection, bounds


def _speckle() -> SpecklePrivacy:
    return SpecklePrivacy(anchor=None, label="test", check_every=1, max_overshoot=1.0)  # type: ignore[arg-type]


def test_value_means_are_each_values_pixel_mean_repeated_for_its_reads():
    means = np.array([10.0, 20.0, 30.0, 40.0, 50.0])
    means.flags.writeable = False
    selection, bounds = _inputs(means)
    got = _speckle().value_means(selection, bounds, means, 7, 2)
    assert np.array_equal(got.values, [20, 40, 50, 20, 40, 50, 20])
    assert np.array_equal(got.per_read, np.repeat(got.values, 4))
    assert (got.mean, got.minimum, got.kept_max, got.kept_outside) == (got.values.mean(), 20.0, 50.0, 0)
    assert not got.values.flags.writeable and not got.per_read.flags.writeable


def test_value_means_are_reused_for_the_same_read_only_means_and_recomputed_for_new_ones():
    means = np.array([10.0, 20.0, 30.0, 40.0, 50.0])
    means.flags.writeable = False
    selection, bounds = _inputs(means)
    speckle = _speckle()
    first = speckle.value_means(selection, bounds, means, 7, 1)
    assert speckle.value_means(selection, bounds, means, 7, 1) is first
    assert speckle.value_means(selection, bounds, means, 8, 1) is not first  # another draw size
    moved = means + 5.0  # the anchor's power changed: a new array, whose kept pixels leave their bounds
    moved.flags.writeable = False
    assert speckle.value_means(selection, bounds, moved, 7, 1).kept_outside == 3


def test_writeable_means_are_never_trusted_from_an_earlier_draw():
    means = np.array([10.0, 20.0, 30.0, 40.0, 50.0])
    selection, bounds = _inputs(means.copy())
    speckle = _speckle()
    assert speckle.value_means(selection, bounds, means, 3, 1).kept_outside == 0
    means[3] = np.nan  # changed in place: a NaN mean counts as outside its bounds
    assert speckle.value_means(selection, bounds, means, 3, 1).kept_outside == 1
