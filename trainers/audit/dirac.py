"""Dirac canaries of the white-box audit (:mod:`trainers.audit.white_box`, ``update`` mode and the
multi-run audit): secret coordinates of the flattened update, each given ``+a`` or ``-a`` by a
secret coin, joining the update at the claimed sampling rate by their own coin and scored on what
the auditor sees of every step's release."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from opu_hal.randomness.secure_random import SecureGenerator

from ..core.errors import TrainingConfigError
from .bounds import SCORE_KINDS


@dataclass
class DiracCanaries:
    """White-box canaries on a flattened update (module docstring): ``+-a`` at their coordinates,
    alternating sign from step to step, scored at every step (inclusion stays secret)."""

    coordinates: np.ndarray
    heads: np.ndarray
    magnitude: float
    sampling_rate: float
    generator: SecureGenerator = field(default_factory=SecureGenerator)
    scores: dict[str, np.ndarray] = field(init=False)
    joined: np.ndarray = field(init=False)
    steps: int = field(default=0, init=False)
    _previous: np.ndarray | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.scores = {kind: np.zeros(len(self.coordinates)) for kind in SCORE_KINDS}
        self.joined = np.zeros(len(self.coordinates), dtype=np.int64)

    @classmethod
    def draw(cls, count: int, dimension: int, magnitude: float, sampling_rate: float) -> DiracCanaries:
        generator = SecureGenerator()
        if count > dimension:
            raise TrainingConfigError(f"--canaries {count}: the update has only {dimension} coordinates")
        coordinates = np.argsort(generator.uniform(dimension))[:count]
        heads = generator.uniform(count) < 0.5
        return cls(coordinates, heads, magnitude, sampling_rate, generator)

    @property
    def pattern(self) -> float:
        """The public sign ``s_t = (-1)^t`` of the current step."""
        return -1.0 if self.steps % 2 else 1.0

    def insert(self, update: torch.Tensor) -> torch.Tensor:
        """The update with this step's joining canaries added (before the noise)."""
        joining = (
            self.generator.uniform(len(self.coordinates)) < self.sampling_rate
            if self.sampling_rate < 1
            else np.ones(len(self.coordinates), dtype=bool)
        )
        self.joined += joining
        signs = np.where(self.heads, 1.0, -1.0) * joining * self.magnitude * self.pattern
        update = update.clone()
        index = torch.from_numpy(self.coordinates).to(update.device)
        update[index] += torch.from_numpy(signs).to(update.device, update.dtype)
        return update

    def observe(self, seen: torch.Tensor) -> None:
        """Score what the auditor sees of this step's release at every canary's coordinate."""
        values = seen.detach().flatten().cpu().double().numpy()[self.coordinates]
        self.scores["sum"] += self.pattern * values
        if self._previous is not None:
            self.scores["difference"] += self.pattern * (values - self._previous)
        self._previous = values
        self.steps += 1
