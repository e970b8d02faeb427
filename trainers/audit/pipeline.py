"""White-box canaries through the real pipeline (issue 44): each canary is one ROW of the training
set the run loads, inserted before sampling and centring, so the run's own sampler decides when it
is in a batch and the run's own centring release sums its features.

**Construction** (Steinke, Nasr and Jagielski 2023, Algorithm 1 and Theorem 3.3, with the delta
term of Appendix D). ``m`` canaries get independent fair coins ``c_i``. Under add/remove adjacency a
heads canary is in the training set and a tails canary is not (the paper's inclusion by coin); under
replace-one a canary is always present, as itself (heads) or as its twin (tails), so that flipping
one coin moves the input to a replace-one neighbour (the theorem's proof uses only that flipping
one coin, the others fixed, gives neighbouring inputs). The base examples are always present and
known to the auditor. The rows are placed at secret random positions. The run is then (epsilon,
delta)-DP in each coin, whatever its sampler and centring do, and the guess-based bound holds for
any score computed from what the run releases. The run's shape must not depend on the coins: under
add/remove the public training-set size is declared as ``n + m`` (``--public-dataset-size``), so the
sampling rate, the steps and the centring divisor are the same for every draw of the coins. A
full-batch run (batch size at least the training-set size) stays full-batch (batch ``n + m``): every
row is then in every batch, the base examples' update is public and the auditor subtracts it, as the
``update`` mode does at rate 1; otherwise the batch size is kept, the canaries lower the sampling
rate, and the claim the audit holds its bound against is accounted for that rate.

**A canary's contributions** (the white-box threat model the DP proofs cover, as in
:mod:`trainers.audit`): in the updates, when the sampler puts its row in a batch, the row is taken
out of the batch the method computes on and ``s_t v e_j`` is added to the pre-noise update instead,
``j`` its own coordinate, ``s_t = (-1)^t`` the public pattern, ``v`` the measured sensitivity
(add/remove) or ``+-`` half of it (replace-one, heads and twin); in the features (what the centring
release sums), ``+-R e_k`` on its own feature coordinate ``k`` (``R`` the centring clip radius, a
public random sign; the twin carries the opposite sign).

**Scores** (larger means heads): ``sum`` and ``difference`` as in :mod:`trainers.audit`, on the
released update (less the public base update at rate 1; the release itself below it, where the
batch is secret); ``likelihood``: the log-likelihood ratio
under the accounted law (:mod:`.likelihood`), summed over every step (inclusion is secret, so every
step is one where the canary could have been sampled) plus the centring release's; ``empirical``
(full-batch runs, where the rest of each release is public): the likelihood ratio under the noise
law estimated from the same release's non-canary coordinates (:func:`.likelihood.empirical_llr`),
which separates noise of the right variance and the wrong law; and ``centring``: the centring
release's own evidence, the released sum less the base examples' clipped features.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from opu_hal.randomness.secure_random import SecureGenerator

from ..core.centering import Centering, clipped_sum, feature_radius
from ..core.data import Dataset, Split
from ..core.errors import TrainingConfigError
from ..run.config import TrainConfig
from ..run.dataset import center_run_data
from ..run.loop import Trainer
from ..run.setup import public_size
from .likelihood import empirical_llr, gaussian_llr, step_llr

PIPELINE_KINDS = ("sum", "difference", "likelihood", "empirical")
#: At most this many noise values of each release estimate its law for the ``empirical`` score.
NOISE_SAMPLE = 20000


@dataclass
class PipelineCanaries:
    """Canary rows, their coins and coordinates, and their scores (module docstring)."""

    heads: np.ndarray
    replace_one: bool
    generator: SecureGenerator = field(default_factory=SecureGenerator)
    features: np.ndarray = field(init=False)
    feature_signs: np.ndarray = field(init=False)
    coordinates: np.ndarray = field(init=False)
    magnitude: float = field(default=0.0, init=False)
    sampling_rate: float = field(default=1.0, init=False)
    noise_std: float | None = field(default=None, init=False)
    scores: dict[str, np.ndarray] = field(init=False)
    joined: np.ndarray = field(init=False)
    steps: int = field(default=0, init=False)
    rows: torch.Tensor = field(init=False)
    sampled: torch.Tensor = field(init=False)
    _previous: np.ndarray | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        m = len(self.heads)
        self.scores = {kind: np.zeros(m) for kind in PIPELINE_KINDS}
        self.joined = np.zeros(m, dtype=np.int64)
        self.coordinates = np.zeros(m, dtype=np.int64)
        self.sampled = torch.zeros(0, dtype=torch.long)

    @classmethod
    def draw(cls, count: int, replace_one: bool) -> PipelineCanaries:
        """``count`` canaries with secret fair coins (a secure generator)."""
        generator = SecureGenerator()
        return cls(generator.uniform(count) < 0.5, replace_one, generator)

    def _place_on_features(self, n_features: int) -> None:
        """Feature coordinates (distinct while the canaries do not outnumber the features) and public signs."""
        count = len(self.heads)
        tiles = -(-count // n_features)
        self.features = np.concatenate([np.argsort(self.generator.uniform(n_features)) for _ in range(tiles)])[:count]
        self.feature_signs = np.where(self.generator.uniform(count) < 0.5, 1.0, -1.0)

    @property
    def present(self) -> np.ndarray:
        """The canaries that are rows of the training set (all under replace-one, heads otherwise)."""
        return np.ones_like(self.heads) if self.replace_one else self.heads.copy()

    @property
    def coin_signs(self) -> np.ndarray:
        """``+1`` for heads, ``-1`` for tails (the twin's sign under replace-one)."""
        return np.where(self.heads, 1.0, -1.0)

    def training_split(self, base: Split) -> Split:
        """``base`` with the present canaries' rows at secret random positions; remembers which row
        is which canary (``-1``: a base example)."""
        d = base.x.shape[1]
        self._place_on_features(d)
        present = np.flatnonzero(self.present)
        x = torch.zeros(len(present), d, dtype=base.x.dtype)
        values = self.feature_signs[present] * self.coin_signs[present] * feature_radius(d)
        x[torch.arange(len(present)), torch.from_numpy(self.features[present])] = torch.from_numpy(values).to(x.dtype)
        owner = torch.cat([torch.full((len(base.x),), -1, dtype=torch.long), torch.from_numpy(present)])
        order = torch.from_numpy(np.argsort(self.generator.uniform(len(owner))))
        self.rows = owner[order]
        rows_x = torch.cat([base.x.cpu(), x])[order].to(base.x.device)
        rows_y = torch.cat([base.y.cpu(), torch.zeros(len(present), dtype=base.y.dtype)])[order].to(base.y.device)
        return Split(rows_x, rows_y)

    def take_out(self, indices: torch.Tensor) -> torch.Tensor:
        """The base examples of a batch drawn by the run's sampler; its canaries are kept for :meth:`plant`."""
        owners = self.rows[indices.cpu()]
        self.sampled = owners[owners >= 0]
        return indices[(owners < 0).to(indices.device)]

    @property
    def pattern(self) -> float:
        """The public sign ``s_t = (-1)^t`` of the current step."""
        return -1.0 if self.steps % 2 else 1.0

    def plant(self, update: torch.Tensor) -> torch.Tensor:
        """``update`` plus the contributions of this step's sampled canaries (before the noise)."""
        chosen = self.sampled.numpy()
        self.joined[chosen] += 1
        values = self.coin_signs[chosen] * self.magnitude * self.pattern
        update = update.clone()
        index = torch.from_numpy(self.coordinates[chosen]).to(update.device)
        update[index] += torch.from_numpy(values).to(update.device, update.dtype)
        return update

    def observe(self, released: torch.Tensor) -> None:
        """Score one step's release at every canary's coordinate, sampled or not (inclusion is secret)."""
        values = released.detach().flatten().cpu().double().numpy()
        x = values[self.coordinates]
        if self.sampling_rate >= 1:  # the base update is public and was subtracted: the rest is noise
            noise = np.delete(values, self.coordinates)[:: max(1, (len(values) - len(x)) // NOISE_SAMPLE)]
            contribution = np.full(len(x), self.pattern * self.magnitude)
            self.scores["empirical"] += empirical_llr(x, contribution, noise, self.replace_one)
        self.scores["sum"] += self.pattern * x
        if self._previous is not None:
            self.scores["difference"] += self.pattern * (x - self._previous)
        self._previous = x
        if self.noise_std is not None:
            contribution = np.full(len(x), self.pattern * self.magnitude)
            self.scores["likelihood"] += step_llr(x, contribution, self.sampling_rate, self.noise_std, self.replace_one)
        self.steps += 1

    def observe_centring(self, centering: Centering, base_sum: torch.Tensor, size: int) -> None:
        """Score the centring release: the released sum (mean times the public size) less the base
        examples' clipped features, at each canary's feature coordinate, oriented by its sign."""
        residual = (centering.mean.double().cpu() * size - base_sum).numpy()
        x = residual[self.features] * self.feature_signs
        self.scores["centring"] = x
        if centering.noise_std is not None and "likelihood" in self.scores:
            radius = np.full(len(x), centering.radius)
            self.scores["likelihood"] += gaussian_llr(x, radius, centering.noise_std, self.replace_one)


class CanaryTrainer(Trainer):
    """A :class:`~trainers.run.loop.Trainer` whose training set holds ``planted``'s rows, inserted
    after scaling and before centring, and whose batches hand their canaries to ``planted``."""

    def __init__(self, config: TrainConfig, planted: PipelineCanaries, **kwargs: Any) -> None:
        self.planted = planted
        super().__init__(config, **kwargs)

    def _load_data(self, data: Dataset | None) -> None:
        centre = self.config.center_features
        self.config = replace(self.config, center_features=False)
        super()._load_data(data)
        base = self.train_split
        canaries = len(self.planted.heads)
        shape = self.config.public_dataset_size or len(base.x)
        public = None if self.planted.replace_one else shape + canaries
        batch = shape + canaries if self.config.batch_size >= shape else self.config.batch_size
        self.config = replace(
            self.config, center_features=centre, train_limit=None, public_dataset_size=public, batch_size=batch
        )
        self.data = replace(self.data, train=self.planted.training_split(base))
        self.train_split = self.data.train
        self.base_feature_sum = clipped_sum(base.x.cpu(), feature_radius(base.x.shape[1]))
        self.centering = None
        if centre:
            self.data, self.train_split, self.centering = center_run_data(
                self.config, self.data, self.train_split, self.ranks, self.log
            )
        if self.centering is not None and self.centering.event is not None:
            self.planted.observe_centring(
                self.centering, self.base_feature_sum, public_size(self.config, len(self.train_split))
            )

    def _step(self, indices: torch.Tensor) -> tuple[float, int, int]:
        return super()._step(self.planted.take_out(indices))


def place_on_update(
    planted: PipelineCanaries, dimension: int, magnitude: float, sampling_rate: float, noise_std: float | None
) -> None:
    """Give the canaries their update coordinates (distinct, secret) and sizes, once the run's
    method is built: ``magnitude`` the measured sensitivity (halved under replace-one)."""
    if len(planted.heads) > dimension:
        raise TrainingConfigError(f"--canaries {len(planted.heads)}: the update has only {dimension} coordinates")
    planted.coordinates = np.argsort(planted.generator.uniform(dimension))[: len(planted.heads)]
    planted.magnitude = magnitude / 2 if planted.replace_one else magnitude
    planted.sampling_rate, planted.noise_std = sampling_rate, noise_std
