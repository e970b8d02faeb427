"""The loop every method shares: data, sampling, optimizer, accounting, checkpoints, record.

``train(config)`` returns the result record (a dict) and writes it to ``out`` when given. The
record holds the method, profile, dataset, hyperparameters, per-epoch train / validation / test
loss and accuracy, gradient alignment, epsilon, the noise reports seen, and ``final`` with
``test_accuracy`` (a fraction), ``wall_time_s`` and, for private methods, ``epsilon``/``delta``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from tqdm import tqdm

from opu_hal import Device
from opu_hal.privacy import Accountant, PrivacyBudget
from opu_hal.runtime.validation import planned_steps

from ..core.averaging import WeightAverage, make_schedule
from ..core.centering import Centering
from ..core.data import Dataset
from ..core.errors import TrainingConfigError
from ..distributed.aggregation import synchronize_step
from ..distributed.context import SingleProcess, rank_context
from ..distributed.setup import broadcast_model, check_method, route_releases
from ..methods import METHODS
from .chance import warn_if_chance
from .config import TrainConfig
from .dataset import center_run_data, load_run_data
from .disk import probe_outputs, unsaved_checkpoint, write_record
from .journal import RunJournal, budget_allows, charge_planned
from .output import NoiseLog
from .privacy import check_accounting, claim_statement, plan_noise
from .record import epoch_line, epoch_record, run_record
from .setup import (
    _limit,
    _to,
    apply_operating_point,
    build_method,
    build_network,
    build_sampler,
    check_model_memory,
    check_output_path,
    make_optimizer,
    open_run_device,
    resolve_compute,
)
from .state import resume, trainer_state


class Callback:
    """Hooks a caller installs on a :class:`Trainer` (progress reporting, tests, profiling).

    Override what you need; every hook receives the trainer and returns nothing.
    """

    def after_step(self, trainer: Trainer) -> None:
        """Called after each step is applied, accounted and (if due) checkpointed."""


class Trainer:
    """One run; :meth:`run` trains and returns the record.

    The trainer owns the device it opened from the config's profile and closes it in
    :meth:`close` (or on leaving ``with Trainer(...) as t:``); a device handed in is the caller's
    and is never closed here. ``ranks`` is this process's place in a torchrun job
    (:mod:`trainers.distributed`; default one process): only rank 0 logs, journals and checkpoints.
    """

    def __init__(
        self,
        config: TrainConfig,
        *,
        data: Dataset | None = None,
        device: Device | None = None,
        progress: bool = True,
        log: Callable[[str], None] | None = None,
        callbacks: Sequence[Callback] = (),
        ranks: SingleProcess | None = None,
    ) -> None:
        config.validate()
        self.config = config
        self.ranks = ranks or SingleProcess()
        check_method(config.method, self.ranks)
        self.progress = progress and self.ranks.is_main
        self.log = log or (lambda message: print(message, file=sys.stderr, flush=True))
        self.log = self.log if self.ranks.is_main else (lambda message: None)
        self.callbacks = list(callbacks)
        self.run_journal = RunJournal(None)
        self._load_data(data)
        self.device = device if device is not None else open_run_device(config, self.ranks)
        self._owns_device = device is None and self.device is not None  # never close the caller's
        try:
            apply_operating_point(self.device, config.temperature_c)
            self._build_model()
            self._build_privacy()
            self._build_checkpointing()
        except BaseException:
            self.close()
            raise

    # -- construction ----------------------------------------------------------------------------
    def _load_data(self, data: Dataset | None) -> None:
        config = self.config
        self.data, self.train_split = load_run_data(config, data, self.log, self.progress)
        self.centering: Centering | None = None
        if config.center_features:  # a release charged in _build_privacy
            self.data, self.train_split, self.centering = center_run_data(
                config, self.data, self.train_split, self.ranks, self.log
            )

    def _build_model(self) -> None:
        config = self.config
        sizes = [self.data.n_features, *config.hidden, self.data.n_classes]
        check_model_memory(sizes, config.batch_size)
        self.compute = resolve_compute(config.compute, METHODS[config.method])
        self.data = _to(self.data, self.compute)
        self.train_split = _limit(self.data.train, config.train_limit)
        self.model = build_network(config, self.data, self.compute)
        # Method.model is typed MLP, yet the trains_cnn methods (dp-sgd, dp-dfa, bp) take this CNN and
        # narrow it by isinstance; typing Method over its network is left to a follow-up
        self.method = build_method(
            config,
            self.model,  # type: ignore[arg-type]
            self.device,
            self.data,
            self.train_split,
        ).to(self.compute)
        broadcast_model(self.ranks, self.model)
        self.optimizer = make_optimizer(config, self.model)
        self.sampler = build_sampler(config, self.method, len(self.train_split), self.ranks)
        per_epoch = self.sampler.steps_per_epoch
        self.planned_steps = config.epochs * per_epoch
        planned_steps(self.planned_steps, f"--epochs {config.epochs} of {per_epoch} steps", error=TrainingConfigError)
        self.schedule = make_schedule(config.lr_schedule, self.optimizer, self.planned_steps, per_epoch)
        self.average = WeightAverage(self.model, config.weight_average) if config.weight_average else None
        self.noise_log = NoiseLog()
        self.epochs: list[dict[str, Any]] = []
        self.position = (0, 0)  # (epoch, step in epoch) of the next step
        self.global_step = 0
        self.elapsed = 0.0
        #: Where :func:`train` will write the record (probed with the checkpoint before the first draw).
        self.out: str | os.PathLike[str] | None = None

    def _build_privacy(self) -> None:
        config = self.config
        self.accountant: Accountant | None = None
        self.budget: PrivacyBudget | None = None
        self.stopped_by_budget = False
        if self.method.private:
            self.accountant = Accountant(self.method.neighboring, conversion=config.accounting)
            check_accounting(self.accountant, getattr(self.method, "event_for", None))
            if self.centering is not None and self.centering.event is not None:
                self.accountant.step(self.centering.event)
            if config.target_epsilon is not None:  # on the claimed epsilon for a method charged a claim
                self.budget = PrivacyBudget(config.target_epsilon, config.delta, claimed=self.method.claim is not None)
            plan_noise(self.method, self.planned_steps, config, self.log, spent=self.accountant)
            route_releases(self.ranks, config, self.method)

    def _build_checkpointing(self) -> None:
        self.run_journal = RunJournal(self.config.checkpoint if self.ranks.is_main else None)
        self.run_journal.acquire()
        try:
            if self.config.resume:
                resume(self)
            else:
                self.run_journal.refuse_overwriting()
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        """Let go of the checkpoint lock (the device is closed by whoever opened it)."""
        self.run_journal.release()

    # -- device life -----------------------------------------------------------------------------
    def close(self) -> None:
        """Release the checkpoint lock and close the device this trainer opened (never one it was given)."""
        self.release()
        if self._owns_device and self.device is not None:
            self.device.close()

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- checkpoints (trainers.run.journal, trainers.run.state) -----------------------------------------
    def checkpoint(self) -> None:
        """One consistent checkpoint: every rank has finished the step, then rank 0 writes it."""
        self.ranks.barrier("the checkpoint barrier")
        self.checkpoint_now()

    def checkpoint_now(self) -> None:
        """Rank 0 writes the checkpoint (no other rank holds a journal)."""
        if self.ranks.is_main:
            try:
                self.run_journal.save(trainer_state(self))
            except OSError as exc:
                raise unsaved_checkpoint(self, exc) from None

    # -- one epoch -------------------------------------------------------------------------------
    def _step(self, indices: torch.Tensor) -> tuple[float, int, int]:
        local = self.ranks.shard(indices)  # this rank's share of the global batch
        x, y = self.train_split.x[local], self.train_split.y[local]
        self.optimizer.zero_grad(set_to_none=True)
        self.method.current_step = self.ranks.step = self.global_step
        output = synchronize_step(self.ranks, self.model, self.method.compute_gradients(x, y), self.method.private)
        self.optimizer.step()
        self.method.after_step()
        self.schedule.step()
        if self.average is not None:
            self.average.update(self.model)
        self.noise_log.add(output.noise)
        if self.accountant is not None:
            if output.privacy_event is None:
                raise TrainingConfigError(
                    f"method {self.method.name!r} is private but its step returned no privacy_event"
                )
            self.accountant.step(output.privacy_event)
        return output.loss_sum, output.correct, output.count

    def _charge_planned(self, count: int) -> None:
        charge_planned(self.accountant, self.method.planned_event(), count)

    def _run_epoch(self, epoch: int, start: int) -> dict[str, float] | None:
        loss_sum, correct, count = 0.0, 0, 0
        bar = tqdm(
            total=self.sampler.steps_per_epoch,
            initial=start,
            desc=f"epoch {epoch + 1}/{self.config.epochs}",
            disable=not (self.progress and sys.stderr.isatty()),
            leave=False,
            file=sys.stderr,
            dynamic_ncols=True,
        )
        try:
            for step, indices in self.sampler.epoch(epoch, start):
                if self.method.private and not budget_allows(self.budget, self.accountant, self.method.planned_event()):
                    self.stopped_by_budget = True
                    break
                self.run_journal.begin(self.global_step)
                batch_loss, batch_correct, batch_count = self._step(indices)
                self.run_journal.drawn()
                loss_sum, correct, count = loss_sum + batch_loss, correct + batch_correct, count + batch_count
                self.global_step += 1
                self.position = (epoch, step + 1)
                if self.config.checkpoint and self.global_step % self.config.checkpoint_every == 0:
                    self.checkpoint()
                for callback in self.callbacks:
                    callback.after_step(self)
                bar.update(1)
                if step % 10 == 0 and count and not self.method.private:  # training statistics are secret
                    bar.set_postfix(loss=f"{loss_sum / count:.4f}", acc=f"{correct / count:.4f}")
        finally:
            bar.close()
        if count == 0:
            return None
        return {"train_loss": loss_sum / count, "train_accuracy": correct / count}

    def run(self, max_epochs: int | None = None) -> dict[str, Any]:
        """Train to the configured number of epochs (or ``max_epochs`` more of them, to train in
        stages: a later :meth:`run` or a ``--resume`` continues); returns the record so far."""
        probe_outputs(self, lambda: trainer_state(self), None if self.out is None else os.fspath(self.out))
        if self.config.checkpoint and self.global_step == 0 and not self.config.resume:
            self.checkpoint()  # before the first draw: any journal line then has a checkpoint to resume from
        if self.method.prepare(self.train_split, self.accountant, self.log):
            # A method's private set-up ran (DP-MAC's pre-training and histogram), charged to the ledger.
            self.checkpoint()
        epoch, start = self.position
        if start >= self.sampler.steps_per_epoch:
            epoch, start = epoch + 1, 0
        last = self.config.epochs if max_epochs is None else min(self.config.epochs, epoch + max_epochs)
        while epoch < last and not self.stopped_by_budget:
            began = time.perf_counter()
            stats = self._run_epoch(epoch, start)
            if self.compute.type == "cuda":
                torch.cuda.synchronize(self.compute)  # the epoch's queued GPU work counts in its time
            seconds = time.perf_counter() - began
            self.elapsed += seconds
            if stats is None:
                break
            record = epoch_record(self, epoch, stats, seconds)
            self.epochs.append(record)
            self.log(self._summary(record))
            self.position = (epoch + 1, 0)
            self.checkpoint()
            epoch, start = epoch + 1, 0
        if self.stopped_by_budget:
            what = "epsilon" if self.method.claim is None else claim_statement(self.method.claim)
            self.log(
                f"stopped at step {self.global_step}: the next step would exceed {what} "
                f"{self.config.target_epsilon} at delta {self.config.delta}"
            )
        self.checkpoint()
        if self.epochs and (epoch >= self.config.epochs or self.stopped_by_budget):  # the end, not a stage
            note = warn_if_chance(
                self.epochs[-1].get("test_accuracy"), self.data.n_classes, self.config.method, self.method.private
            )
            if note is not None:
                self.log(f"warning: {note}")
        return self.record()

    def _summary(self, record: dict[str, Any]) -> str:
        return epoch_line(record, self.method.private)

    def record(self) -> dict[str, Any]:
        """The result record so far (a private run's: only its public surface)."""
        return run_record(self)


def train(
    config: TrainConfig,
    *,
    out: str | os.PathLike[str] | None = None,
    progress: bool = True,
    data: Dataset | None = None,
    device: Device | None = None,
    log: Callable[[str], None] | None = None,
    callbacks: Sequence[Callback] = (),
) -> dict[str, Any]:
    """Train as ``config`` says; returns the result record and writes it to ``out`` if given.

    A ``device`` handed in stays open (the caller owns it); one loaded from the profile is closed.
    A torchrun job (``WORLD_SIZE`` > 1) joins its process group here; only rank 0 writes ``out``.
    """
    ranks = rank_context(config.compute)
    try:
        if out is not None and ranks.is_main:
            check_output_path(out, "--out")
        with Trainer(
            config, data=data, device=device, progress=progress, log=log, callbacks=callbacks, ranks=ranks
        ) as trainer:
            trainer.out = out
            record = trainer.run()
        if out is not None and ranks.is_main:
            write_record(out, record, log or (lambda message: print(message, file=sys.stderr, flush=True)))
    finally:
        ranks.close()
    return record
