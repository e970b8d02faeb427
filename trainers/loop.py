"""The loop every method shares: data, sampling, optimizer, accounting, checkpoints, record.

``train(config)`` returns the result record (a dict) and writes it to ``out`` when given. The
record holds the method, profile, dataset, hyperparameters, per-epoch train / validation / test
loss and accuracy, gradient alignment, epsilon, the noise reports seen, and ``final`` with
``test_accuracy`` (a fraction), ``wall_time_s`` and, for private methods, ``epsilon``/``delta``.
"""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from dataclasses import replace
from tqdm import tqdm

from opu_hal import Device, load_device, load_profile
from opu_hal.runtime.memory import available_bytes, gib
from opu_hal.privacy import Accountant, PrivacyBudget
from opu_hal.randomness.secure_random import new_secret_key

from .journal import RunJournal, budget_allows, charge_planned
from .config import TrainConfig
from .core.data import Dataset, Split, load_dataset, scale_inputs, scaling_reference
from .core.cnn import CNN
from .core.feature_cache import cached_scatter_features
from .core.errors import CheckpointError, TrainingConfigError
from .core.evaluation import evaluate
from .alignment import gradient_alignment
from .methods import METHODS, Method, MethodContext
from .core.model import MLP
from .privacy import plan_noise
from .public_surface import epoch_summary, public_record
from .records import NoiseLog, write_json
from .core.sampling import Sampler

# Settings a resumed run may change: none affects privacy, data or the model.
RESUMABLE_KEYS = frozenset({"resume", "checkpoint_every", "alignment"})



class Callback:
    """Hooks a caller installs on a :class:`Trainer` (progress reporting, tests, profiling).

    Override what you need; every hook receives the trainer and returns nothing.
    """

    def after_step(self, trainer: "Trainer") -> None:
        """Called after each step is applied, accounted and (if due) checkpointed."""


def make_optimizer(config: TrainConfig, model: torch.nn.Module) -> torch.optim.Optimizer:
    if config.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=config.lr)
    return torch.optim.SGD(model.parameters(), lr=config.lr, momentum=config.momentum)


def build_method(config: TrainConfig, model: MLP, device: Device | None, data: Dataset,
                 train: Split) -> Method:
    """The config's method; its accounting sees the public dataset size (:func:`public_size`)."""
    cls = METHODS[config.method]
    context = MethodContext(config=config, device=device, n_features=data.n_features,
                            n_classes=data.n_classes, dataset_size=public_size(config, len(train)))
    method = cls(model, context)
    if config.public_dataset_size is not None and method.neighboring != "add_remove":
        raise TrainingConfigError(
            f"--public-dataset-size applies under add/remove adjacency; method {config.method!r} "
            f"({config.sampling or cls.sampling} sampling) is accounted under replace-one, whose neighbours "
            "share the dataset size: drop the option")
    return method


def public_size(config: TrainConfig, actual: int) -> int:
    """The training-set size a run's shape and accounting use: the declared public size under
    add/remove (``--public-dataset-size``: the true ``n`` then stays private), else ``n`` itself,
    which the record then declares public (:mod:`trainers.public_surface`)."""
    return actual if config.public_dataset_size is None else config.public_dataset_size


def dataset_size_statement(config: TrainConfig, neighboring: str) -> str:
    """What the record says about the training-set size it publishes (issue 27, item 3)."""
    if neighboring == "replace_one":
        return "public: replace-one neighbours share the training-set size n"
    if config.public_dataset_size is not None:
        return ("declared public bound (--public-dataset-size): sampling rate, steps and record use it; "
                "the true n is not published")
    return ("public by convention: n was read from the data and is published; pass --public-dataset-size "
            "to keep it private under add/remove")


def _limit(split: Split, limit: int | None) -> Split:
    if limit is None or limit >= len(split):
        return split
    return Split(split.x[:limit], split.y[:limit])


def resolve_compute(requested: str, method: type[Method]) -> torch.device:
    """``auto`` -> CUDA when present and the method supports it, else CPU; ``cuda`` without CUDA refused."""
    if requested == "cuda" and not torch.cuda.is_available():
        raise TrainingConfigError(f"--compute cuda: torch {torch.__version__} sees no CUDA device; use --compute cpu or auto")
    if requested == "cuda" and not method.cuda_ready:
        raise TrainingConfigError(f"--compute cuda: method {method.name!r} runs on the CPU only; use --compute cpu")
    if requested == "auto" and torch.cuda.is_available() and method.cuda_ready:
        return torch.device("cuda")
    return torch.device("cuda" if requested == "cuda" else "cpu")


def _to(data: Dataset, device: torch.device) -> Dataset:
    if device.type == "cpu":
        return data
    move = lambda split: Split(split.x.to(device), split.y.to(device))  # noqa: E731
    return Dataset(data.name, move(data.train), move(data.validation), move(data.test))


MODEL_COPIES = 6  # weights, gradients, Adam's two moments, feedback matrices, one released update


def check_model_memory(sizes: list[int], batch_size: int) -> None:
    """Refuse, before allocating, a model whose training would not fit in the host's memory."""
    parameters = sum((a + 1) * b for a, b in zip(sizes[:-1], sizes[1:]))
    need = 4 * (MODEL_COPIES * parameters + 4 * batch_size * sum(sizes))
    available = available_bytes()
    if need > available:
        raise TrainingConfigError(
            f"--hidden {','.join(map(str, sizes[1:-1]))} with --batch-size {batch_size} needs about {gib(need)} "
            f"({parameters} parameters) but {gib(available)} is available; use smaller widths or batches")


def check_output_path(path: str | os.PathLike[str], option: str) -> None:
    """Refuse, before any training, an output path that could not be written afterwards."""
    from opu_hal.runtime.paths import unwritable_reason

    reason = unwritable_reason(path)
    if reason is not None:
        raise TrainingConfigError(f"{option} {path}: {reason}")


class Trainer:
    """One run; :meth:`run` trains and returns the record.

    The trainer owns the device it opened from the config's profile and closes it in
    :meth:`close` (or on leaving ``with Trainer(...) as t:``); a device handed in is the caller's
    and is never closed here.
    """

    def __init__(self, config: TrainConfig, *, data: Dataset | None = None, device: Device | None = None,
                 progress: bool = True, log: Callable[[str], None] | None = None,
                 callbacks: Sequence[Callback] = ()) -> None:
        config.validate()
        self.config = config
        self.progress = progress
        self.log = log or (lambda message: print(message, file=sys.stderr, flush=True))
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
        if config.features == "scatter":
            raw = cached_scatter_features(raw, log=self.log, progress=self.progress)
        raw_train = _limit(raw.train, config.train_limit)
        reference = scaling_reference(raw, raw_train, METHODS[config.method].private)
        self.data = scale_inputs(raw, config.inputs, reference=reference)
        self.train_split = _limit(self.data.train, config.train_limit)

    def _open_device(self) -> Device | None:
        """Load the config's device when the run needs one; the trainer then owns it."""
        config = self.config
        cls = METHODS[config.method]
        profile = config.profile_name
        if profile is None or not (cls.uses_device or config.profile is not None
                                   or config.noise_source == "device"):
            return None
        self._owns_device = True
        return load_device(profile, calibration=config.calibration)

    def _apply_operating_point(self) -> None:
        if self.device is None or self.config.temperature_c is None:
            return
        if not self.device.capabilities.temperature_settable:
            raise TrainingConfigError(
                f"--temperature-c: profile {self.device.profile.label!r} has no settable temperature")
        self.device.set_options(temperature_c=self.config.temperature_c)

    def _build_model(self) -> None:
        config = self.config
        sizes = [self.data.n_features, *config.hidden, self.data.n_classes]
        check_model_memory(sizes, config.batch_size)
        self.compute = resolve_compute(config.compute, METHODS[config.method])
        self.data = _to(self.data, self.compute)
        self.train_split = _limit(self.data.train, config.train_limit)
        if config.model == "cnn":
            network = CNN(self.data.n_features, config.hidden, self.data.n_classes, config.activation,
                          seed=config.seed, features=config.features, strides=config.conv_strides,
                          head=config.head_hidden)
        else:
            network = MLP(sizes, config.activation, seed=config.seed)
        self.model = network.to(self.compute)
        self.method = build_method(config, self.model, self.device, self.data, self.train_split).to(self.compute)
        self.optimizer = make_optimizer(config, self.model)
        sampling = config.sampling or self.method.sampling
        self.sampler = Sampler(sampling, len(self.train_split), config.batch_size, config.seed,
                               min_batch=getattr(self.method, "min_batch", 0),
                               secret_key=new_secret_key() if self.method.private else None,
                               public_size=public_size(config, len(self.train_split)))
        self.planned_steps = config.epochs * self.sampler.steps_per_epoch
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
            self.accountant = Accountant(self.method.neighboring)  # type: ignore[arg-type]
            if config.target_epsilon is not None:
                self.budget = PrivacyBudget(config.target_epsilon, config.delta)
            plan_noise(self.method, self.planned_steps, config, self.log)

    def _build_checkpointing(self) -> None:
        self.run_journal = RunJournal(self.config.checkpoint)
        self.run_journal.acquire()
        try:
            if self.config.resume:
                self._resume()
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

    def __enter__(self) -> "Trainer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- checkpoints (trainers.journal) ------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        """Every part by its ``state_dict``. SECRET: the sampler key and the method's noise state."""
        return {
            "config": self.config.to_dict(),
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "method": self.method.state_dict(),
            "accountant": self.accountant.state_dict() if self.accountant else None,
            "sampler": self.sampler.state_dict(),
            "progress": {"position": list(self.position), "global_step": self.global_step, "epochs": self.epochs,
                         "noise_log": self.noise_log.to_list(), "elapsed": self.elapsed},
        }

    def checkpoint(self) -> None:
        self.run_journal.save(self._state())

    def _check_same_settings(self, saved: dict[str, Any]) -> None:
        mine = self.config.to_dict()
        for key in sorted(set(saved) | set(mine)):
            if key in RESUMABLE_KEYS:
                continue
            if saved.get(key) != mine.get(key):
                raise TrainingConfigError(
                    f"--resume: checkpoint {self.config.checkpoint} was made with {key}={saved.get(key)!r}, "
                    f"this run has {key}={mine.get(key)!r}; a resumed run keeps every privacy, data and model "
                    "setting: resume with the same settings")

    def _resume(self) -> None:
        state = self.run_journal.load()
        self._check_same_settings(dict(state["config"]))
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.method.load_state_dict(state["method"])
        if state["accountant"] is not None and self.accountant is not None:
            self.accountant.load_state_dict(state["accountant"])
        self.sampler = self.sampler.with_state(state["sampler"])
        progress = state["progress"]
        self.position = (int(progress["position"][0]), int(progress["position"][1]))
        self.global_step = int(progress["global_step"])
        self.epochs = list(progress["epochs"])
        self.noise_log = NoiseLog(progress["noise_log"])
        self.elapsed = float(progress["elapsed"])
        self.run_journal.reconcile(self.planned_steps, self.method.replayable or self.accountant is None,
                                   self._charge_planned, self.checkpoint, self.log)

    # -- one epoch -------------------------------------------------------------------------------
    def _step(self, indices: torch.Tensor) -> tuple[float, int, int]:
        x, y = self.train_split.x[indices], self.train_split.y[indices]
        self.optimizer.zero_grad(set_to_none=True)
        self.method.current_step = self.global_step
        output = self.method.compute_gradients(x, y)
        self.optimizer.step()
        after_step = getattr(self.method, "after_step", None)
        if after_step is not None:
            after_step()
        self.noise_log.add(output.noise)
        if self.accountant is not None:
            if output.privacy_event is None:
                raise TrainingConfigError(
                    f"method {self.method.name!r} is private but its step returned no privacy_event")
            self.accountant.step(output.privacy_event)
        return output.loss_sum, output.correct, output.count

    def _charge_planned(self, count: int) -> None:
        charge_planned(self.accountant, self.method.planned_event(), count)

    def _run_epoch(self, epoch: int, start: int) -> dict[str, float] | None:
        loss_sum, correct, count = 0.0, 0, 0
        bar = tqdm(total=self.sampler.steps_per_epoch, initial=start, desc=f"epoch {epoch + 1}/{self.config.epochs}",
                   disable=not (self.progress and sys.stderr.isatty()), leave=False, file=sys.stderr, dynamic_ncols=True)
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
        val_loss, val_acc = evaluate(self.model, self.data.validation)
        test_loss, test_acc = evaluate(self.model, self.data.test)
        published = {} if self.method.private else train_stats  # un-noised statistics of the secret batches
        record: dict[str, Any] = {"epoch": epoch + 1, "steps": self.global_step, **published,
                                  "validation_loss": val_loss, "validation_accuracy": val_acc,
                                  "test_loss": test_loss, "test_accuracy": test_acc, "epoch_time_s": seconds}
        if self.config.alignment and not self.method.private and isinstance(self.model, MLP):
            x, y = self._probe()
            self.method.current_step = -1 - epoch
            record["alignment"] = gradient_alignment(self.method, x, y)
        if self.accountant is not None:
            record["epsilon"] = self.accountant.get_epsilon(self.config.delta)
        return record

    def run(self, max_epochs: int | None = None) -> dict[str, Any]:
        """Train to the configured number of epochs (or ``max_epochs`` more of them, to train in
        stages: a later :meth:`run` or a ``--resume`` continues); returns the record so far."""
        prepare = getattr(self.method, "prepare", None)
        if prepare is not None and prepare(self.train_split, self.accountant, self.log):
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
            self.log(f"stopped at step {self.global_step}: the next step would exceed epsilon "
                     f"{self.config.target_epsilon} at delta {self.config.delta}")
        self.checkpoint()
        return self.record()

    def _summary(self, record: dict[str, Any]) -> str:
        if self.method.private:
            return epoch_summary(record)
        text = (f"epoch {record['epoch']:>3}  loss {record['train_loss']:.4f}  train {record['train_accuracy']:.4f}  "
                f"val {record['validation_accuracy']:.4f}  test {record['test_accuracy']:.4f}  "
                f"{record['epoch_time_s']:.1f}s")
        if "epsilon" in record:
            text += f"  eps {record['epsilon']:.4g}"
        return text

    # -- record ----------------------------------------------------------------------------------
    def _camera_time(self) -> dict[str, float]:
        """Frames and camera-seconds of the run's device privacy counts: the last draw's per-step
        figures times every step that drew (completed, and lost to a kill but charged)."""
        per_step = self.method.describe().get("device_noise") or {}
        if "camera_seconds" not in per_step:
            return {}
        draws = self.global_step + self.run_journal.lost_steps_charged
        return {"camera_frames": per_step["frames"] * draws, "camera_seconds": per_step["camera_seconds"] * draws}

    def record(self) -> dict[str, Any]:
        last = self.epochs[-1] if self.epochs else {}
        final: dict[str, Any] = {
            "test_accuracy": last.get("test_accuracy", float("nan")),
            "validation_accuracy": last.get("validation_accuracy", float("nan")),
            "wall_time_s": self.elapsed, "epochs_completed": len(self.epochs), "steps": self.global_step,
        }
        privacy: dict[str, Any] | None = None
        if self.accountant is not None:
            final["epsilon"] = self.accountant.get_epsilon(self.config.delta)
            final["delta"] = self.config.delta
            final.update(self._camera_time())
            privacy = {"neighboring": self.accountant.neighboring, "ledger": self.accountant.to_dict(),
                       "dataset_size": dataset_size_statement(self.config, self.method.neighboring),
                       "stopped_by_budget": self.stopped_by_budget,
                       "target_epsilon": self.config.target_epsilon,
                       "lost_steps_charged": self.run_journal.lost_steps_charged, **self.method.describe()}
        device = self.device
        record = {
            "method": self.config.method,
            "profile": None if device is None else {"name": device.profile.label,
                                                     "backend": device.profile.backend,
                                                     "source": str(device.profile.source)},
            "dataset": {"name": self.data.name, "train": public_size(self.config, len(self.train_split)),
                        "validation": len(self.data.validation), "test": len(self.data.test),
                        "features": self.config.features, "n_features": self.data.n_features},
            "hyperparameters": self.config.to_dict(),
            "sampling": {"kind": self.sampler.kind, "steps_per_epoch": self.sampler.steps_per_epoch},
            "epochs": self.epochs,
            "noise_reports": self.noise_log.to_list(),
            "privacy": privacy,
            "final": final,
            "torch": {"version": torch.__version__, "threads": torch.get_num_threads(), "compute": str(self.compute),
                      **({"gpu": torch.cuda.get_device_name(self.compute)} if self.compute.type == "cuda" else {})},
        }
        return public_record(record) if self.method.private else record


def train(config: TrainConfig, *, out: str | os.PathLike[str] | None = None, progress: bool = True,
          data: Dataset | None = None, device: Device | None = None,
          log: Callable[[str], None] | None = None, callbacks: Sequence[Callback] = ()) -> dict[str, Any]:
    """Train as ``config`` says; returns the result record and writes it to ``out`` if given.

    A ``device`` handed in stays open (the caller owns it); one loaded from the profile is closed.
    """
    if out is not None:
        check_output_path(out, "--out")
    with Trainer(config, data=data, device=device, progress=progress, log=log, callbacks=callbacks) as trainer:
        record = trainer.run()
    if out is not None:
        write_json(out, record)
    return record
