"""Post-processing of the released iterates: a learning-rate schedule and a weight average.

Both are functions of the step count and of the parameters the optimizer already produced from
noisy releases, so neither reads private data nor costs privacy (post-processing). De et al.
(2022, "Unlocking high-accuracy differentially private image classification through scale",
section 3.2) report that an exponential moving average of the parameters helps DP-SGD; the
evaluation (validation, test, the record) then reads the averaged weights.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

SCHEDULES = ("constant", "cosine", "decay-0.9", "decay-0.85-per-10")


def make_schedule(
    kind: str, optimizer: torch.optim.Optimizer, total_steps: int, steps_per_epoch: int = 1
) -> torch.optim.lr_scheduler.LambdaLR:
    """``constant``; ``cosine``: the learning rate times ``(1 + cos(pi t / T)) / 2`` at step ``t`` of
    ``T`` (Loshchilov and Hutter 2017, without restarts), reaching 0 at the planned last step;
    ``decay-0.9``: times 0.9 after each epoch (paper 003's decay of ``W``'s learning rate, Table 2);
    ``decay-0.85-per-10``: times 0.85 after every 10 epochs (paper 004, section 4.2)."""
    if kind not in SCHEDULES:
        raise ValueError(f"unknown learning-rate schedule {kind!r}: choose {' or '.join(SCHEDULES)}")
    total = max(1, total_steps)
    epoch = max(1, steps_per_epoch)

    def factor(step: int) -> float:
        if kind == "constant":
            return 1.0
        if kind == "decay-0.9":
            return 0.9 ** (step // epoch)
        if kind == "decay-0.85-per-10":
            return 0.85 ** (step // (10 * epoch))
        return 0.5 * (1.0 + math.cos(math.pi * min(step, total) / total))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


class WeightAverage:
    """An exponential moving average of a model's parameters and buffers, with the usual warm-up
    ``min(decay, (1 + t) / (10 + t))`` so early averages are not dominated by the initialization."""

    def __init__(self, model: torch.nn.Module, decay: float) -> None:
        if not 0 < decay < 1:
            raise ValueError(f"weight-average decay must be in (0, 1), got {decay}")
        self.decay = decay
        self.updates = 0
        self.shadow = {name: value.detach().clone() for name, value in model.state_dict().items()}

    def update(self, model: torch.nn.Module) -> None:
        self.updates += 1
        rate = 1 - min(self.decay, (1 + self.updates) / (10 + self.updates))
        with torch.no_grad():
            for name, value in model.state_dict().items():
                average = self.shadow[name]
                if average.is_floating_point():
                    average.lerp_(value.detach(), rate)
                else:
                    average.copy_(value)

    @contextmanager
    def applied(self, model: torch.nn.Module) -> Iterator[None]:
        """The averaged weights in ``model`` inside the block, its own weights back after it."""
        live = {name: value.detach().clone() for name, value in model.state_dict().items()}
        model.load_state_dict(self.shadow)
        try:
            yield
        finally:
            model.load_state_dict(live)

    def state_dict(self) -> dict[str, Any]:
        return {"decay": self.decay, "updates": self.updates, "shadow": self.shadow}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.decay, self.updates = float(state["decay"]), int(state["updates"])
        self.shadow = {name: value.clone() for name, value in state["shadow"].items()}


@contextmanager
def evaluated_weights(model: torch.nn.Module, average: WeightAverage | None) -> Iterator[None]:
    """The weights an evaluation reads: the average when there is one, else the model's own."""
    if average is None:
        yield
    else:
        with average.applied(model):
            yield
