"""A trainer's checkpointed state and its resume, across ranks (the files are trainers.run.journal's).

Only rank 0 holds the lock and journal and writes checkpoints (after a barrier, so the checkpoint
is one consistent step of every rank). On resume, rank 0 restores and reconciles the journal
first (charging, and saving, the steps that drew noise after the checkpoint), then every other
rank loads that same checkpoint, so all ranks hold one ledger.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from ..core.centering import centered
from ..core.errors import TrainingConfigError
from ..distributed.setup import fresh_generator
from .journal import load_checkpoint
from .output import NoiseLog
from .setup import _limit

#: A :class:`trainers.run.loop.Trainer` (read by attribute: the loop imports this module).
Trainer = Any

# Settings a resumed run may change: none affects privacy, data or the model.
RESUMABLE_KEYS = frozenset({"resume", "checkpoint_every", "alignment"})


def trainer_state(trainer: Trainer) -> dict[str, Any]:
    """Every part by its ``state_dict``. SECRET: the sampler key and the method's noise state."""
    return {
        "config": trainer.config.to_dict(),
        "model": trainer.model.state_dict(),
        "optimizer": trainer.optimizer.state_dict(),
        "schedule": trainer.schedule.state_dict(),
        "average": trainer.average.state_dict() if trainer.average is not None else None,
        "method": trainer.method.state_dict(),
        "accountant": trainer.accountant.state_dict() if trainer.accountant else None,
        "centering": trainer.centering.mean if trainer.centering is not None else None,
        "sampler": trainer.sampler.state_dict(),
        "progress": {
            "position": list(trainer.position),
            "global_step": trainer.global_step,
            "epochs": trainer.epochs,
            "noise_log": trainer.noise_log.to_list(),
            "elapsed": trainer.elapsed,
        },
        "ranks": {"world_size": trainer.ranks.world_size},
    }


def check_same_settings(trainer: Trainer, saved: dict[str, Any]) -> None:
    mine = trainer.config.to_dict()
    for key in sorted(set(saved) | set(mine)):
        if key in RESUMABLE_KEYS:
            continue
        if saved.get(key) != mine.get(key):
            raise TrainingConfigError(
                f"--resume: checkpoint {trainer.config.checkpoint} was made with {key}={saved.get(key)!r}, "
                f"this run has {key}={mine.get(key)!r}; a resumed run keeps every privacy, data and model "
                "setting: resume with the same settings"
            )


def restore(trainer: Trainer, state: dict[str, Any]) -> None:
    """Load a checkpoint's parts into ``trainer``."""
    check_same_settings(trainer, dict(state["config"]))
    trainer.model.load_state_dict(state["model"])
    trainer.optimizer.load_state_dict(state["optimizer"])
    trainer.schedule.load_state_dict(state["schedule"])
    if trainer.average is not None:
        trainer.average.load_state_dict(state["average"])
    trainer.method.load_state_dict(state["method"])
    if state["accountant"] is not None and trainer.accountant is not None:
        trainer.accountant.load_state_dict(state["accountant"])
    if state.get("centering") is not None:
        recenter(trainer, state["centering"])
    trainer.sampler = trainer.sampler.with_state(state["sampler"])
    progress = state["progress"]
    trainer.position = (int(progress["position"][0]), int(progress["position"][1]))
    trainer.global_step = int(progress["global_step"])
    trainer.epochs = list(progress["epochs"])
    trainer.noise_log = NoiseLog(progress["noise_log"])
    trainer.elapsed = float(progress["elapsed"])
    if trainer.ranks.distributed and trainer.config.distributed_noise == "shares":
        fresh_generator(trainer.method)  # each rank's noise shares stay its own secret


def recenter(trainer: Trainer, mean: torch.Tensor) -> None:
    """Move the data onto a checkpoint's released mean instead of this process's own draw: a resumed
    run trains on the features its ledger paid for (the discarded draw is never published)."""
    trainer.data = centered(trainer.data, mean - trainer.centering.mean)
    trainer.train_split = _limit(trainer.data.train, trainer.config.train_limit)
    trainer.centering = replace(trainer.centering, mean=mean.clone())


def replayable(trainer: Trainer, state: dict[str, Any]) -> bool:
    """Whether the steps after the checkpoint can be replayed bit for bit: software noise drawn by
    one generator, on the same number of ranks (another world size sums in another order)."""
    saved_world = int(state["ranks"]["world_size"])
    same_shape = saved_world == trainer.ranks.world_size and (
        saved_world == 1 or trainer.config.distributed_noise == "single"
    )
    return trainer.accountant is None or (trainer.method.replayable and same_shape)


def resume(trainer: Trainer) -> None:
    """Restore the checkpoint on every rank; rank 0 first reconciles its journal."""
    ranks = trainer.ranks
    if ranks.is_main:
        state = trainer.run_journal.load()
        restore(trainer, state)
        trainer.run_journal.reconcile(
            trainer.planned_steps,
            replayable(trainer, state),
            trainer._charge_planned,
            trainer.checkpoint_now,
            trainer.log,
        )
    ranks.barrier("waiting for rank 0 to reconcile the journal")
    if not ranks.is_main:
        restore(trainer, load_checkpoint(trainer.config.checkpoint))
