"""``PrivacyEngine``: private training of a user's model on a user's data, in the user's loop,
in the style of Opacus (``make_private`` returns the module, optimizer and loader to use):

>>> engine = PrivacyEngine()
>>> model, optimizer, loader = engine.make_private(
...     module=model, optimizer=optimizer, data_loader=(x, y), noise_multiplier=1.1,
...     max_grad_norm=1.0, batch_size=64)                             # doctest: +SKIP
>>> for xb, yb in loader:                                             # doctest: +SKIP
...     optimizer.zero_grad(); F.cross_entropy(model(xb), yb).backward(); optimizer.step()
>>> engine.get_epsilon(1e-5)                                          # doctest: +SKIP

Methods: ``"dp-sgd"`` (Abadi et al. 2016; Poisson sampling, per-example clipping of every
``nn.Linear``, Gaussian noise ``z C`` on the sum) and ``"dp-dfa"`` (Lee & Kifer, Algorithm 1;
fixed-size batches, DFA signals, noise ``z Delta`` on the average, software Gaussian or the device's
Skellam counts with ``noise_source="device"``). Batches are sampled with a secret 256-bit key,
noise comes from the secure generator (or the device), and the accountant is charged with the same
events the built-in trainers charge. The methods offered, and the reasons others are refused
(``"dp-ulr"``, ``"dp-mac"``: their updates are not a function of one forward pass and
``loss.backward()``), are their registrations' (:mod:`trainers.methods.registry`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from opu_hal import Device, load_device
from opu_hal.privacy import Accountant, Event, PrivacyBudget, smallest_noise_multiplier
from opu_hal.privacy.accountant import CONVERSIONS
from opu_hal.randomness.secure_random import SecureGenerator

from ..core.errors import TrainingConfigError
from ..methods import SPECS, MethodSpec
from ..methods.dfa_noise import device_lattice, dp_dfa_release
from ..run.privacy import check_accounting
from .batch_check import InputWatch, check_batch
from .class_updates import NamedDFAClipping
from .data import Data, PrivateDataLoader, as_dataset
from .optimizer import DPOptimizer, PrivateUpdate
from .placement import model_device, resolve_opu, to_device
from .updates import DFAClipping, PerExampleClipping
from .validation import check_make_private, check_model_takes_data, check_update, check_with_epsilon, planned_steps


def user_update(
    spec: MethodSpec,
    module: nn.Module,
    max_grad_norm: float,
    loss_reduction: str,
    size: int,
    n: int,
    tau_h: float,
    beta: float,
    feedback_seed: int,
    layers: Sequence[str] | None = None,
) -> PrivateUpdate:
    """The registered update of ``spec`` (``MethodSpec.user_update``) on the user's ``module``: for
    dp-dfa, the chain of an ``nn.Sequential`` or the named layers of any module (:mod:`.class_updates`)."""
    if spec.user_update == "per-example-clipping":
        if layers is not None:
            raise TrainingConfigError("layers= names dp-dfa's feedback layers; dp-sgd clips every nn.Linear")
        return PerExampleClipping(module, max_grad_norm, loss_reduction, size, n)
    if layers is None and isinstance(module, nn.Sequential):
        return DFAClipping(module, max_grad_norm, tau_h, beta, loss_reduction, size, n, feedback_seed)
    return NamedDFAClipping(module, max_grad_norm, tau_h, beta, loss_reduction, size, n, feedback_seed, layers)


def offered_spec(method: str) -> MethodSpec:
    """The registration of ``method`` if ``make_private`` offers it; else an error naming why not."""
    offered = [name for name, spec in SPECS.items() if spec.user_update is not None]
    spec = SPECS.get(method) if isinstance(method, str) else None
    if spec is not None and spec.user_update is None and spec.api_refusal is not None:
        raise TrainingConfigError(
            f"method {method!r} is not offered by make_private: {spec.api_refusal}. Train it on your own tensors "
            f"with trainers.run.loop.train(TrainConfig.for_method({method!r}, ...), data=trainers.core.data.Dataset(...)) "
            f"or `opu-hal train --method {method}` (the built-in MLP)"
        )
    if spec is None or spec.user_update is None:
        raise TrainingConfigError(f"method {method!r}: choose one of {', '.join(offered)}")
    return spec


def check_options(
    spec: MethodSpec, size: int | None, noise_multiplier: float, public_dataset_size: int | None, noise_source: str
) -> int:
    """The batch size ``make_private`` uses; refuses options the method cannot take, naming them."""
    method = spec.trainer.name
    if size is None:
        raise TrainingConfigError(
            "batch_size is required when data_loader is a Dataset, tensors or a DataLoader(batch_size=None): "
            "pass make_private(..., batch_size=N) (dp-sgd: the expected batch size; dp-dfa: the fixed size)"
        )
    if not (math.isfinite(noise_multiplier) and noise_multiplier > 0):
        raise TrainingConfigError(f"noise_multiplier must be a finite number > 0, got {noise_multiplier}")
    if public_dataset_size is not None and spec.trainer.sampling != "poisson":
        raise TrainingConfigError(
            f"public_dataset_size is for add/remove adjacency (Poisson sampling); under "
            f"{method}'s replace-one adjacency the dataset size is public already"
        )
    if noise_source in ("software", "device") and noise_source not in spec.noise_sources:
        raise TrainingConfigError(
            f"{method} adds {' or '.join(spec.noise_sources)} noise only; "
            f"noise_source={noise_source!r} is not one of its sources"
        )
    return size


class PrivacyEngine:
    """Makes a module, optimizer and data private; holds the accountant of the run.

    ``accountant``: ``"rdp"``, or ``"pld"`` (the project's :class:`opu_hal.privacy.Accountant` with
    ``conversion="pld"``: the smaller of the RDP and PLD epsilons; dp-sgd's Poisson-sampled events).
    ``secure_mode`` is always on: sampling keys from OS entropy, noise from the secure generator.
    """

    def __init__(self, accountant: str = "rdp") -> None:
        if accountant not in CONVERSIONS:
            raise TrainingConfigError(f"accountant {accountant!r}: choose 'rdp' or 'pld'")
        self.conversion = accountant
        self.accountant: Accountant | None = None
        self.optimizer: DPOptimizer | None = None
        self.data_loader: PrivateDataLoader | None = None
        self.noise_multiplier: float | None = None
        self.stopped_by_budget = False
        self.watch: InputWatch | None = None

    # -- wrapping --------------------------------------------------------------------------------
    def make_private(
        self,
        *,
        module: nn.Module,
        optimizer: torch.optim.Optimizer,
        data_loader: Data,
        noise_multiplier: float,
        max_grad_norm: float,
        loss_reduction: str = "mean",
        method: str = "dp-sgd",
        noise_source: str = "software",
        device: Device[Any] | str | None = None,
        opu: Device[Any] | str | None = None,
        layers: Sequence[str] | None = None,
        batch_size: int | None = None,
        tau_h: float = 1.0,
        beta: float = 0.9,
        lattice_resolution: float = 10.0,
        rounding_analysis: str = "per-coordinate",
        feedback_seed: int = 0,
        public_dataset_size: int | None = None,
        target_epsilon: float | None = None,
        target_delta: float = 1e-5,
    ) -> tuple[nn.Module, DPOptimizer, PrivateDataLoader]:
        """Return ``(module, optimizer, data_loader)`` for the user's loop (Opacus's order).

        Where this differs from Opacus: ``data_loader`` may also be a ``Dataset`` or a tuple of
        tensors (then ``batch_size`` is required; a DataLoader's own batch size is the default);
        the loader's batch size is the EXPECTED size for dp-sgd (Opacus: ``1 / len(loader)`` as the
        rate) and the fixed size for dp-dfa. For dp-dfa ``max_grad_norm`` is the clip ``tau_e`` of
        the output error (the per-example quantity Algorithm 1 bounds), ``tau_h`` clips each layer
        input and ``beta`` is the feedback's spectral norm. ``noise_source="device"`` (dp-dfa only)
        draws Skellam counts from ``opu`` (default ``"opu-sim-dp"``). ``target_epsilon``: stop
        before a step would exceed it at ``target_delta`` (the loader ends its epoch early and
        ``step()`` raises :class:`PrivacyBudgetExhausted`). ``public_dataset_size`` (dp-sgd): under
        add/remove adjacency the true size is private; a declared public size sets the sampling rate
        and the steps per epoch instead (as ``--public-dataset-size``). The module is returned
        itself, with hooks. ``opu``: a profile name, path or opu_hal device (``device=`` is its
        deprecated old name); the torch device is the module's (batches, noise and feedback follow
        it). ``layers`` (dp-dfa): the nn.Linear submodules that take feedback, in forward order.
        """
        spec = offered_spec(method)  # the method first: a refused method names its reason
        opu = resolve_opu(opu, device, "make_private")
        check_make_private({**locals(), "device": opu})
        sampling = spec.trainer.sampling
        dataset, loader_batch, collate = as_dataset(data_loader)
        size = check_options(spec, batch_size or loader_batch, noise_multiplier, public_dataset_size, noise_source)
        loader = self._loader(module, dataset, size, sampling, collate, public_dataset_size, data_loader)
        n = loader.dataset_size
        generator = SecureGenerator()
        update = user_update(spec, module, max_grad_norm, loss_reduction, size, n, tau_h, beta, feedback_seed, layers)
        check_update(update, noise_multiplier)
        lattice, opened = None, None
        if noise_source == "device":
            opened = opu if isinstance(opu, Device) else load_device(opu or "opu-sim-dp")
            dimension = sum(p.numel() for p in update.params)
            lattice = device_lattice(opened, dimension, update.sensitivity, lattice_resolution, rounding_analysis)
        elif noise_source != "software":
            raise TrainingConfigError(f"noise_source must be 'software' or 'device', got {noise_source!r}")
        # The loop's own constructors (trainers.methods.dfa_noise): one release and accounting path.
        mechanism = dp_dfa_release(noise_multiplier, update.sensitivity, lattice, opened, generator)
        self.event_for: Callable[[float], Event] = lambda z: update.event(z, lattice)
        event = self.event_for(noise_multiplier)
        self.accountant = Accountant(update.neighboring, conversion=self.conversion)  # type: ignore[arg-type]
        check_accounting(self.accountant, self.event_for, f"PrivacyEngine(accountant={self.conversion!r})")
        budget = PrivacyBudget(target_epsilon, target_delta) if target_epsilon is not None else None
        self.optimizer = self._wrap(
            module, loader, DPOptimizer(optimizer, update, mechanism, event, self.accountant, budget)
        )
        self.data_loader, self.noise_multiplier, self.method = loader, float(noise_multiplier), method
        return module, self.optimizer, loader

    def _loader(
        self,
        module: nn.Module,
        dataset: Any,
        size: int,
        sampling: str,
        collate: Any,
        public: int | None,
        user_loader: Data,
    ) -> PrivateDataLoader:
        """The private loader (on the module's torch device), once the module runs on the data's first
        examples and an epoch's steps are plausible."""
        device = model_device(module)
        loader = PrivateDataLoader(dataset, size, sampling, collate, self._should_stop, public, device, user_loader)
        first = loader.fetch(torch.arange(min(2, len(dataset))))
        check_model_takes_data(module, first if device is None else to_device(first, device, False))
        planned_steps(len(loader), f"make_private: one epoch of batches of {size} from {loader.dataset_size} examples")
        return loader

    def _wrap(self, module: nn.Module, loader: PrivateDataLoader, optimizer: DPOptimizer) -> DPOptimizer:
        """``optimizer`` releasing only the batch ``loader`` drew, as ``module`` saw it (:mod:`.batch_check`)."""
        self.watch = watch = InputWatch(module)
        optimizer.batch_guard = lambda examples: check_batch(loader.take_drawn(), watch.seen, examples)
        return optimizer

    def make_private_with_epsilon(
        self,
        *,
        module: nn.Module,
        optimizer: torch.optim.Optimizer,
        data_loader: Data,
        target_epsilon: float,
        target_delta: float,
        epochs: int,
        max_grad_norm: float,
        **kwargs: Any,
    ) -> tuple[nn.Module, DPOptimizer, PrivateDataLoader]:
        """:meth:`make_private` with the smallest noise multiplier whose ``epochs`` epochs reach
        ``target_epsilon`` at ``target_delta`` (inverse accounting, as ``--target-epsilon``); the
        budget stop is set to the same target."""
        check_with_epsilon(target_epsilon, target_delta, epochs)
        if kwargs.get("device") is not None:  # resolved once: one deprecation warning, not two
            kwargs["opu"] = resolve_opu(kwargs.get("opu"), kwargs.pop("device"), "make_private_with_epsilon")
        probe = PrivacyEngine(self.conversion)
        wrapped = probe.make_private(
            module=module,
            optimizer=optimizer,
            data_loader=data_loader,
            noise_multiplier=1.0,
            max_grad_norm=max_grad_norm,
            **kwargs,
        )
        steps = planned_steps(epochs * len(wrapped[2]), f"make_private_with_epsilon: {epochs} epoch(s)")
        neighboring = probe.accountant.neighboring  # type: ignore[union-attr]
        probe.detach()
        z = smallest_noise_multiplier(
            probe.event_for,
            steps,
            target_epsilon,
            target_delta,
            neighboring,
            spent=Accountant(neighboring, conversion=self.conversion),
        )
        return self.make_private(
            module=module,
            optimizer=optimizer,
            data_loader=data_loader,
            noise_multiplier=z,
            max_grad_norm=max_grad_norm,
            target_epsilon=target_epsilon,
            target_delta=target_delta,
            **kwargs,
        )

    def detach(self) -> None:
        """Remove the hooks from the module (it trains by plain backprop again)."""
        if self.optimizer is not None:
            self.optimizer.update.remove()
        if self.watch is not None:
            self.watch.remove()

    # -- accounting ------------------------------------------------------------------------------
    def _should_stop(self) -> bool:
        if self.optimizer is not None and not self.optimizer.allows_next_step():
            self.stopped_by_budget = True
        return self.stopped_by_budget

    def get_epsilon(self, delta: float) -> float:
        """Epsilon spent so far at ``delta`` (every ``optimizer.step()`` is charged)."""
        if self.accountant is None:
            raise TrainingConfigError("call make_private first")
        return self.accountant.get_epsilon(delta)

    @property
    def steps(self) -> int:
        return self.accountant.steps if self.accountant is not None else 0

    # -- checkpoints -----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Accountant ledger, loader epoch and sampling key, noise generator state. SECRET: the key
        and generator state let anyone recompute the batches and noise; keep it with checkpoints only."""
        if self.optimizer is None or self.data_loader is None or self.accountant is None:
            raise TrainingConfigError("state_dict(): call make_private first (there is no run to save)")
        return {
            "accountant": self.accountant.state_dict(),
            "loader": self.data_loader.state_dict(),
            "generator": self.optimizer.mechanism.generator.secret_state(),
            "noise_multiplier": self.noise_multiplier,
            "stopped_by_budget": self.stopped_by_budget,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` into an engine that ``make_private`` set up the same way."""
        if self.optimizer is None or self.data_loader is None or self.accountant is None:
            raise TrainingConfigError("load_state_dict(): call make_private first, set up as the saved run was")
        if not isinstance(state, dict) or "noise_multiplier" not in state:
            raise TrainingConfigError("load_state_dict(): state must be a dict from PrivacyEngine.state_dict()")
        if state["noise_multiplier"] != self.noise_multiplier:
            raise TrainingConfigError(
                f"checkpoint noise multiplier {state['noise_multiplier']} != {self.noise_multiplier}"
            )
        self.accountant.load_state_dict(state["accountant"])
        self.optimizer.accountant = self.accountant
        self.data_loader.load_state_dict(state["loader"])
        self.optimizer.mechanism.generator = SecureGenerator.from_secret_state(state["generator"])
        self.stopped_by_budget = bool(state["stopped_by_budget"])
