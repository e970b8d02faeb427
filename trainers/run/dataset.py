"""The run's dataset: loaded with the public class count, featurized, scaled, limited and, when asked,
centred on a (released) training mean."""

from __future__ import annotations

from collections.abc import Callable

from ..core.centering import Centering, centered, release_for_run
from ..core.data import Dataset, Split, load_dataset, scale_inputs, scaling_reference, with_public_classes
from ..core.feature_cache import cached_scatter_features
from ..distributed.context import SingleProcess
from ..methods import METHODS
from .config import TrainConfig
from .setup import _limit, public_size


def load_run_data(
    config: TrainConfig, data: Dataset | None, log: Callable[[str], None], progress: bool
) -> tuple[Dataset, Split]:
    """The scaled dataset of the run (``data`` or the config's) and its training split, limited."""
    raw = data or load_dataset(config.dataset, config.data_dir, config.validation_fraction, config.seed)
    raw = with_public_classes(raw, config.n_classes)  # never from the private labels (issue 44, item 1)
    if config.features == "scatter":
        raw = cached_scatter_features(raw, log=log, progress=progress)
    raw_train = _limit(raw.train, config.train_limit)
    reference = scaling_reference(raw, raw_train, METHODS[config.method].private)
    scaled = scale_inputs(raw, config.inputs, reference=reference)
    return scaled, _limit(scaled.train, config.train_limit)


def center_run_data(
    config: TrainConfig, data: Dataset, train: Split, ranks: SingleProcess, log: Callable[[str], None]
) -> tuple[Dataset, Split, Centering]:
    """Centre every split on the training features' mean (:mod:`trainers.core.centering`): exact in a
    non-private run, else a Gaussian release, charged by the loop's accountant, made once by rank 0.
    Returns the centred dataset, its limited training split and the centring."""
    cls = METHODS[config.method]
    centering = (
        release_for_run(
            train.x,
            cls.private,
            config.centering_noise,
            public_size(config, len(train)),
            cls.neighboring_for(config),
        )
        if ranks.is_main
        else None
    )
    centering = ranks.broadcast_object(centering, what="the released feature mean")
    if centering is None:
        raise RuntimeError("rank 0 broadcast no feature mean")
    data = centered(data, centering.mean)
    log(centering.log_line)
    return data, _limit(data.train, config.train_limit), centering
