"""The result record of a run and its per-epoch log line; a private run publishes only its
declared public surface (:mod:`trainers.run.public_surface`)."""

from __future__ import annotations

from typing import Any

import torch

from opu_hal.contract.anchor_map import drift_check_frames

from ..core.averaging import evaluated_weights
from ..core.evaluation import evaluate
from ..core.model import MLP
from ..distributed.setup import describe
from .alignment import gradient_alignment
from .privacy import claim_statement, spent_epsilon
from .public_surface import epoch_summary, public_record
from .setup import dataset_size_statement, public_size

#: A :class:`trainers.run.loop.Trainer` (read by attribute: the loop imports this module).
Trainer = Any


def epoch_line(record: dict[str, Any], private: bool) -> str:
    """The log line of one epoch's record (a private run's: :func:`epoch_summary`)."""
    if private:
        return epoch_summary(record)
    text = (
        f"epoch {record['epoch']:>3}  loss {record['train_loss']:.4f}  train {record['train_accuracy']:.4f}  "
        f"val {record['validation_accuracy']:.4f}  test {record['test_accuracy']:.4f}  "
        f"{record['epoch_time_s']:.1f}s"
    )
    if "epsilon" in record:
        text += f"  eps {record['epsilon']:.4g}"
    if "claimed_epsilon" in record:
        text += f"  claimed eps {record['claimed_epsilon']:.4g} (not a guarantee)"
    return text


def _probe(trainer: Trainer) -> tuple[torch.Tensor, torch.Tensor]:
    """One batch of held-out examples (validation, else test) on which gradient alignment is measured."""
    source = trainer.data.validation if len(trainer.data.validation) else trainer.data.test
    size = min(trainer.config.batch_size, len(source))
    return source.x[:size], source.y[:size]


def epoch_record(trainer: Trainer, epoch: int, train_stats: dict[str, float], seconds: float) -> dict[str, Any]:
    """One epoch's entry of the record: held-out loss and accuracy (averaged weights when kept),
    the training statistics of a non-private run, alignment when asked, and the epsilon spent."""
    method = trainer.method
    with evaluated_weights(trainer.model, trainer.average):
        val_loss, val_acc = evaluate(trainer.model, trainer.data.validation)
        test_loss, test_acc = evaluate(trainer.model, trainer.data.test)
    published = {} if method.private else train_stats  # un-noised statistics of the secret batches
    record: dict[str, Any] = {
        "epoch": epoch + 1,
        "steps": trainer.global_step,
        **published,
        "validation_loss": val_loss,
        "validation_accuracy": val_acc,
        "test_loss": test_loss,
        "test_accuracy": test_acc,
        "epoch_time_s": seconds,
    }
    if trainer.config.alignment and not method.private and isinstance(trainer.model, MLP):
        x, y = _probe(trainer)
        method.current_step = -1 - epoch
        record["alignment"] = gradient_alignment(method, x, y)
    if trainer.accountant is not None:
        record.update(spent_epsilon(trainer.accountant, trainer.config.delta, method.claim))
    return record


def camera_time(trainer: Trainer) -> dict[str, float]:
    """Frames and camera-seconds of the run's device privacy counts: the last draw's per-step
    figures times every step that drew (completed, and lost to a kill but charged), plus a speckle
    anchor's drift-check frames (one every ``anchor_check_every`` draws, the first included)."""
    per_step = trainer.method.describe().get("device_noise") or {}
    if "camera_seconds" not in per_step:
        return {}
    draws = trainer.global_step + trainer.run_journal.lost_steps_charged
    frames, seconds = per_step["frames"] * draws, per_step["camera_seconds"] * draws
    every = per_step.get("anchor_check_every")
    if every and per_step["frames"]:
        checks = drift_check_frames(draws, every)
        frames, seconds = frames + checks, seconds + checks * per_step["camera_seconds"] / per_step["frames"]
    return {"camera_frames": frames, "camera_seconds": seconds}


def run_record(trainer: Trainer) -> dict[str, Any]:
    """The result record so far: run, data, settings, epochs, noise, privacy ledger and final figures."""
    last = trainer.epochs[-1] if trainer.epochs else {}
    final: dict[str, Any] = {
        "test_accuracy": last.get("test_accuracy", float("nan")),
        "validation_accuracy": last.get("validation_accuracy", float("nan")),
        "wall_time_s": trainer.elapsed,
        "epochs_completed": len(trainer.epochs),
        "steps": trainer.global_step,
    }
    privacy: dict[str, Any] | None = None
    if trainer.accountant is not None:
        claim = trainer.method.claim
        final.update(spent_epsilon(trainer.accountant, trainer.config.delta, claim))
        if claim is not None:
            final["claim"] = claim_statement(claim)
        final["delta"] = trainer.config.delta
        final.update(camera_time(trainer))
        privacy = {
            "neighboring": trainer.accountant.neighboring,
            "ledger": trainer.accountant.to_dict(),
            "dataset_size": dataset_size_statement(trainer.config, trainer.method.neighboring),
            "stopped_by_budget": trainer.stopped_by_budget,
            "target_epsilon": trainer.config.target_epsilon,
            "lost_steps_charged": trainer.run_journal.lost_steps_charged,
            **trainer.method.describe(),
        }
        if trainer.centering is not None:
            privacy["centering"] = trainer.centering.describe()
    device = trainer.device
    record = {
        "method": trainer.config.method,
        "profile": None
        if device is None
        else {"name": device.profile.label, "backend": device.profile.backend, "source": str(device.profile.source)},
        "dataset": {
            "name": trainer.data.name,
            "train": public_size(trainer.config, len(trainer.train_split)),
            "validation": len(trainer.data.validation),
            "test": len(trainer.data.test),
            "features": trainer.config.features,
            "n_features": trainer.data.n_features,
        },
        "hyperparameters": trainer.config.to_dict(),
        "sampling": {"kind": trainer.sampler.kind, "steps_per_epoch": trainer.sampler.steps_per_epoch},
        "epochs": trainer.epochs,
        "noise_reports": trainer.noise_log.to_list(),
        "privacy": privacy,
        "final": final,
        **(
            {"distributed": describe(trainer.ranks, trainer.config, trainer.method)}
            if trainer.ranks.distributed
            else {}
        ),
        "torch": {
            "version": torch.__version__,
            "threads": torch.get_num_threads(),
            "compute": str(trainer.compute),
            **({"gpu": torch.cuda.get_device_name(trainer.compute)} if trainer.compute.type == "cuda" else {}),
        },
    }
    return public_record(record) if trainer.method.private else record
