"""DP-SGD on mirror-averaged ScatterNet features: does a flip-invariant linear model beat the record?

    python -m scripts.analysis.flip_symmetric train --dataset fashion-mnist --target-epsilon 3 ...

Runs ``opu-hal train`` (every argument is passed on) with ``--features scatter`` replaced by the
average ``(phi(x) + phi(mirror x)) / 2`` of each image's ScatterNet features and those of its
horizontal mirror. FashionMNIST's classes do not change under a mirror, so the model loses no
class information, and a linear model on these features is flip-invariant. The map is fixed and
uses no data (no privacy cost); the average's norm is at most the features' own
(:func:`trainers.core.centering.feature_radius` still bounds it), so the centring's release stays
as charged. The mirror images' features are computed once and cached like the originals'.
(docs/records.md: measured at epsilon 3, no lift; not kept as a feature option.)
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import trainers.run.dataset as run_dataset
from trainers.cli import main as cli_main
from trainers.core.data import Dataset, Split

_scatter = run_dataset.cached_scatter_features


def mirrored(split: Split) -> Split:
    """Each flattened square image of ``split`` mirrored left to right."""
    n, size = split.x.shape
    side = int(round(size**0.5))
    return Split(split.x.reshape(n, side, side).flip(-1).reshape(n, size).contiguous(), split.y)


def mirror_averaged(data: Dataset, log: Callable[[str], None], progress: bool = True) -> Dataset:
    """The ScatterNet features of ``data`` averaged with those of its mirror images, split by split."""
    plain = _scatter(data, log=log, progress=progress)
    flipped = _scatter(
        data.with_splits(mirrored(data.train), mirrored(data.validation), mirrored(data.test)),
        log=log,
        progress=progress,
    )
    pairs = ((plain.train, flipped.train), (plain.validation, flipped.validation), (plain.test, flipped.test))
    return plain.with_splits(*(Split((a.x + b.x) / 2, a.y) for a, b in pairs))


if __name__ == "__main__":
    run_dataset.cached_scatter_features = mirror_averaged
    sys.exit(cli_main(sys.argv[1:]))
