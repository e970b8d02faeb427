"""Under torchrun only rank 0 announces the noise search: every rank plans the same noise, silently
on the others (one line per job, not one per process)."""

from __future__ import annotations

import pytest

from opu_hal.privacy import PoissonGaussianEvent
from trainers.run.config import TrainConfig
from trainers.run.privacy import plan_noise


class _Method:
    """The two calls the planner makes on a Gaussian-noise method (a batch of 1 % a step)."""

    name, claim, neighboring = "dp-sgd", None, "add_remove"

    def event_for(self, z: float) -> PoissonGaussianEvent:
        return PoissonGaussianEvent(0.01, z)

    def set_noise_multiplier(self, z: float) -> None:
        self.z = z

    def preparation_charge(self) -> tuple[int, tuple[()]]:
        return 0, ()  # no private set-up before training


@pytest.mark.parametrize(("rank", "lines"), [("0", 1), ("1", 0)])
def test_only_rank_0_announces_the_noise_search(monkeypatch, capsys, rank: str, lines: int) -> None:
    monkeypatch.setenv("RANK", rank)
    method, logged = _Method(), []
    plan_noise(method, 300, TrainConfig.for_method("dp-sgd", target_epsilon=3.0), logged.append)
    assert capsys.readouterr().err.count("choosing the noise multiplier") == lines
    assert 0.5 < method.z < 5 and len(logged) == 1  # every rank plans the same noise
