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

from opu_hal import Device, load_device
from opu_hal.privacy import Accountant, PrivacyBudget

from ..core.averaging import WeightAverage, evaluated_weights, make_schedule
from ..core.centering import Centering, centered, release_for_run
from ..core.cnn import CNN
from ..core.data import Dataset, load_dataset, scale_inputs, scaling_reference, with_public_classes
from ..core.errors import TrainingConfigError
from ..core.evaluation import evaluate
from ..core.feature_cache import cached_scatter_features
from ..core.model import MLP
from ..core.sampling import Sampler, default_stream
from ..distributed.aggregation import synchronize_step
from ..distributed.context import SingleProcess, rank_context
from ..distributed.setup import (
    broadcast_model,
    check_method,
    rank_profile,
    route_releases,
    shared_secret,
    shared_stream,
)
from ..methods import METHODS
from .alignment import gradient_alignment
from .config import TrainConfig
from .journal import RunJournal, budget_allows, charge_planned
from .output import NoiseLog, write_json
from .privacy import check_accounting, claim_statement, plan_noise, spent_epsilon
from .record import epoch_line, run_record
from .setup import (
    _limit,
    _to,
    build_method,
    check_model_memory,
    check_output_path,
    make_optimizer,
    public_size,
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
        self._owns_device = False
        self.device = device if device is not None else self._open_device()
        try:
            self._apply_operating_point()
            self._build_model()
            self._build_privacy()
            self._build_checkpointing()
        except BaseException:
            self.close()
            raise

    # -- construction ----------------------------------------------------------------------------
    def _load_data(self, data: Dataset | None) -> None:
        config = self.config
        raw = data or load_dataset(config.dataset, config.data_dir, config.validation_fraction, config.seed)
        raw = with_public_classes(raw, config.n_classes)  # never from the private labels (issue 44, item 1)
        if config.features == "scatter":
            raw = cached_scatter_features(raw, log=self.log, progress=self.progress)
        raw_train = _limit(raw.train, config.train_limit)
        reference = scaling_reference(raw, raw_train, METHODS[config.method].private)
        self.data = scale_inputs(raw, config.inputs, reference=reference)
        self.train_split = _limit(self.data.train, config.train_limit)
        self.centering = self._center() if config.center_features else None

    def _center(self) -> Centering:
        """Centre every split on the training features' mean (:mod:`trainers.core.centering`): exact in a
        non-private run, else a Gaussian release, charged in :meth:`_build_privacy`, made once by rank 0."""
        config, cls, train = self.config, METHODS[self.config.method], self.train_split
        centering = (
            release_for_run(
                train.x,
                cls.private,
                config.centering_noise,
                public_size(config, len(train)),
                cls.neighboring_for(config),
            )
            if self.ranks.is_main
            else None
        )
        centering = self.ranks.broadcast_object(centering, what="the released feature mean")
        if centering is None:
            raise RuntimeError("rank 0 broadcast no feature mean")
        self.data = centered(self.data, centering.mean)
        self.train_split = _limit(self.data.train, config.train_limit)
        self.log(centering.log_line)
        return centering

    def _open_device(self) -> Device | None:
        """Load the config's device when the run needs one; the trainer then owns it."""
        config = self.config
        cls = METHODS[config.method]
        profile = config.profile_name
        if profile is None or not (cls.uses_device or config.profile is not None or config.noise_source == "device"):
            return None
        self._owns_device = True
        return load_device(rank_profile(profile, self.ranks), calibration=config.calibration)

    def _apply_operating_point(self) -> None:
        if self.device is None or self.config.temperature_c is None:
            return
        if not self.device.capabilities.temperature_settable:
            raise TrainingConfigError(
                f"--temperature-c: profile {self.device.profile.label!r} has no settable temperature"
            )
        self.device.set_options(temperature_c=self.config.temperature_c)

    def _build_model(self) -> None:
        config = self.config
        sizes = [self.data.n_features, *config.hidden, self.data.n_classes]
        check_model_memory(sizes, config.batch_size)
        self.compute = resolve_compute(config.compute, METHODS[config.method])
        self.data = _to(self.data, self.compute)
        self.train_split = _limit(self.data.train, config.train_limit)
        network: MLP | CNN
        if config.model == "cnn":
            network = CNN(
                self.data.n_features,
                config.hidden,
                self.data.n_classes,
                config.activation,
                seed=config.seed,
                features=config.features,
                strides=config.conv_strides,
                head=config.head_hidden,
            )
        else:
            network = MLP(sizes, config.activation, seed=config.seed)
        self.model = network.to(self.compute)
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
        sampling = config.sampling or self.method.sampling
        self.sampler = Sampler(
            sampling,
            len(self.train_split),
            config.batch_size,
            config.seed,
            min_batch=self.method.min_batch,
            secret_key=shared_secret(self.ranks) if self.method.private else None,
            public_size=public_size(config, len(self.train_split)),
            stream=shared_stream(self.ranks) if self.method.private else default_stream(),
        )
        self.planned_steps = config.epochs * self.sampler.steps_per_epoch
        self.schedule = make_schedule(config.lr_schedule, self.optimizer, self.planned_steps)
        self.average = WeightAverage(self.model, config.weight_average) if config.weight_average else None
        self.noise_log = NoiseLog()
        self.epochs: list[dict[str, Any]] = []
        self.position = (0, 0)  # (epoch, step in epoch) of the next step
        self.global_step = 0
        self.elapsed = 0.0

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
            self.run_journal.save(trainer_state(self))

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

    def _probe(self) -> tuple[torch.Tensor, torch.Tensor]:
        source = self.data.validation if len(self.data.validation) else self.data.test
        size = min(self.config.batch_size, len(source))
        return source.x[:size], source.y[:size]

    def _epoch_record(self, epoch: int, train_stats: dict[str, float], seconds: float) -> dict[str, Any]:
        with evaluated_weights(self.model, self.average):
            val_loss, val_acc = evaluate(self.model, self.data.validation)
            test_loss, test_acc = evaluate(self.model, self.data.test)
        published = {} if self.method.private else train_stats  # un-noised statistics of the secret batches
        record: dict[str, Any] = {
            "epoch": epoch + 1,
            "steps": self.global_step,
            **published,
            "validation_loss": val_loss,
            "validation_accuracy": val_acc,
            "test_loss": test_loss,
            "test_accuracy": test_acc,
            "epoch_time_s": seconds,
        }
        if self.config.alignment and not self.method.private and isinstance(self.model, MLP):
            x, y = self._probe()
            self.method.current_step = -1 - epoch
            record["alignment"] = gradient_alignment(self.method, x, y)
        if self.accountant is not None:
            record.update(spent_epsilon(self.accountant, self.config.delta, self.method.claim))
        return record

    def run(self, max_epochs: int | None = None) -> dict[str, Any]:
        """Train to the configured number of epochs (or ``max_epochs`` more of them, to train in
        stages: a later :meth:`run` or a ``--resume`` continues); returns the record so far."""
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
            record = self._epoch_record(epoch, stats, seconds)
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
            record = trainer.run()
        if out is not None and ranks.is_main:
            write_json(out, record)
    finally:
        ranks.close()
    return record
