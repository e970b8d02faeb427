"""A diagnostic, not a private run: is the FashionMNIST DP-SGD record limited by the number of
dimensions its noise reaches?

    PCA_K=512 python -m scripts.analysis.pca_oracle train --dataset fashion-mnist --features scatter ...

Runs ``opu-hal train`` (every argument is passed on) on the ScatterNet features projected onto the
top ``PCA_K`` principal directions of the training features' second moment, kept in the original
coordinates (``x' = U U^T x``, so the norm only shrinks and the centring's radius still holds). The
model's predictions then see the noise in ``PCA_K`` dimensions only. The directions are computed from
the private training features **without privacy** (an oracle, an upper bound on what a DP-PCA
could give), so the epsilon the run prints does not cover them: its accuracy is a diagnostic, never
a record. docs/records.md has what it measured.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import torch

import trainers.run.dataset as run_dataset
from trainers.cli import main as cli_main
from trainers.core.data import Dataset, Split

_scatter = run_dataset.cached_scatter_features


def projected(data: Dataset, log: Callable[[str], None], progress: bool = True) -> Dataset:
    """The ScatterNet features of ``data`` projected onto the training features' top ``PCA_K`` directions."""
    k = int(os.environ.get("PCA_K", "512"))
    features = _scatter(data, log=log, progress=progress)
    x = features.train.x.double()
    values, vectors = torch.linalg.eigh(x.T @ x / len(x))
    basis = vectors[:, -k:].float()
    log(f"oracle PCA (not private): the top {k} directions hold {float(values[-k:].sum() / values.sum()):.4f}")

    def project(split: Split) -> Split:
        return Split((split.x @ basis) @ basis.T, split.y)

    return features.with_splits(project(features.train), project(features.validation), project(features.test))


if __name__ == "__main__":
    run_dataset.cached_scatter_features = projected
    sys.exit(cli_main(sys.argv[1:]))
