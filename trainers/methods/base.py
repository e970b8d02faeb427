"""What every training method provides to the loop: gradients for one batch, and its privacy event."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from opu_hal import Device, NoiseReport
from opu_hal.privacy import Event
from opu_hal.privacy.events import Neighboring

from ..core.model import MLP, Trace

#: A :class:`trainers.run.config.TrainConfig`. Not imported: the config validates against this
#: package's registry, so the methods read it by attribute and never import it.
RunConfig = Any


@dataclass
class StepOutput:
    """Loss summed over the batch, correct predictions, batch size, noise the device reported,
    and the privacy event the step spent (``None`` for non-private methods).

    The loop charges ``privacy_event`` to the accountant: the event describes the noise this
    step actually applied, which may differ from :meth:`Method.planned_event` before the step
    (photonic-dp accounts with the lowest ``std_lower`` seen, this step's included).
    """

    loss_sum: float
    correct: int
    count: int
    noise: NoiseReport | None = None
    privacy_event: Event | None = None


@dataclass
class MethodContext:
    """What a method may know about the run: config, device, data sizes."""

    config: RunConfig
    device: Device | None
    n_features: int
    n_classes: int
    dataset_size: int
    extras: dict[str, Any] = field(default_factory=dict)


class Method(ABC):
    """A way of turning a batch into ``.grad`` on every parameter of the model."""

    name: ClassVar[str] = ""
    uses_device: ClassVar[bool] = False
    private: ClassVar[bool] = False
    # Class defaults that an instance may set from its configuration (sampling, device noise):
    neighboring: Neighboring = "add_remove"
    sampling: str = "shuffle"  # shuffle | fixed | poisson
    # Whether a step can be recomputed bit for bit from its seed (no physical noise involved).
    replayable: bool = True
    #: Profile used when the run names none (``None``: the method needs no device).
    default_profile: ClassVar[str | None] = None
    #: The method's paper settings, applied by ``TrainConfig.for_method`` before user overrides.
    defaults: ClassVar[dict[str, Any]] = {}
    #: Private methods whose noise is chosen for a target: need --target-epsilon or --noise-multiplier.
    needs_noise_choice: ClassVar[bool] = False
    #: Whose published claim the run's ledger is charged (its events are not guarantees), e.g. "paper
    #: 004, ..."; ``None`` for a guarantee. The run then plans, stops and reports the claimed epsilon.
    claim: str | None = None
    #: Methods that train any network by its true gradient: a linear model (no hidden layer) or a
    #: CNN (:mod:`trainers.core.cnn`); the DFA family needs an MLP's hidden layers.
    any_network: ClassVar[bool] = False
    #: Methods that train a CNN (:mod:`trainers.core.cnn`): the any-network ones, and DP-DFA's hybrid.
    trains_cnn: ClassVar[bool] = False
    #: Methods whose relation follows the run's sampling: Poisson batches under add/remove, fixed-size
    #: batches under replace-one (DP-SGD, DP-DFA); the others keep :attr:`neighboring`.
    relation_follows_sampling: ClassVar[bool] = False

    @classmethod
    def neighboring_for(cls, config: RunConfig) -> Neighboring:
        """The neighbouring relation a run of this method with ``config`` is accounted under."""
        if not cls.relation_follows_sampling:
            return cls.neighboring
        return "add_remove" if (config.sampling or cls.sampling) == "poisson" else "replace_one"

    @classmethod
    def profile_for(cls, config: RunConfig) -> str | None:
        """The profile a run of this method uses: the user's, else :attr:`default_profile`."""
        return config.profile if config.profile is not None else cls.default_profile

    #: Global step being computed; the loop sets it so per-step random streams are reproducible.
    current_step: int = 0

    def __init__(self, model: MLP, context: MethodContext) -> None:
        self.model = model
        self.context = context

    @abstractmethod
    def compute_gradients(self, x: torch.Tensor, y: torch.Tensor) -> StepOutput:
        """Set ``p.grad`` of every parameter from the batch ``(x, y)``."""

    #: Whether the method runs on a CUDA compute device (``--compute cuda``).
    cuda_ready: ClassVar[bool] = True

    def to(self, device: torch.device) -> Method:
        """Move the method's own tensors (feedback matrices, ...) to ``device``; the loop moves the model."""
        return self

    # -- the noisy release (the white-box audit's hook) ---------------------------------------
    #: Whether each step publishes exactly one noisy release of its flattened clipped update,
    #: made by :meth:`release_update` and routed through :meth:`release` (dp-dfa, dp-sgd).
    single_release: ClassVar[bool] = False
    #: Single-release methods: the length of the flattened update ``u`` (set by their constructor).
    dimension: int
    _release_hook: Callable[[torch.Tensor], torch.Tensor] | None = None

    def release_update(self, u: torch.Tensor) -> torch.Tensor:
        """The noisy release of the flattened clipped update ``u`` (single-release methods)."""
        raise NotImplementedError(f"method {self.name!r} makes no single noisy release per step")

    #: Distributed runs (:mod:`trainers.distributed`): ``aggregator(u_rank, publish)`` sums the ranks'
    #: partial updates and noises the sum once (``publish`` on one rank, or noise shares on all).
    _aggregator: Callable[[torch.Tensor, Callable[[torch.Tensor], torch.Tensor]], torch.Tensor] | None = None

    def release(self, u: torch.Tensor) -> torch.Tensor:
        """What the step publishes of ``u``: :meth:`release_update`, or the installed hook's result
        (in a distributed run, of the ranks' summed ``u``)."""
        publish = self.release_update if self._release_hook is None else self._release_hook
        return publish(u) if self._aggregator is None else self._aggregator(u, publish)

    def aggregate_releases(
        self, aggregator: Callable[[torch.Tensor, Callable[[torch.Tensor], torch.Tensor]], torch.Tensor]
    ) -> None:
        """Distributed runs: route every release through ``aggregator`` (single-release methods)."""
        if not self.single_release:
            raise NotImplementedError(f"method {self.name!r} makes no single noisy release per step to aggregate")
        self._aggregator = aggregator

    def intercept_release(self, hook: Callable[[torch.Tensor], torch.Tensor] | None) -> None:
        """Route every release through ``hook`` (which may call :meth:`release_update` itself), as
        the audit does to plant canaries and observe what is published; ``None`` removes it."""
        if not self.single_release:
            raise NotImplementedError(f"method {self.name!r} makes no single noisy release per step to intercept")
        self._release_hook = hook

    # -- run hooks the loop calls ----------------------------------------------------------------
    #: The smallest batch the method's sampler may draw (rejection sampling; 0: no floor).
    min_batch: int = 0

    def prepare(self, train: Any, accountant: Any, log: Callable[[str], None]) -> bool:
        """Private set-up before the first step (DP-MAC's pre-training), charged to ``accountant``;
        returns whether it ran (the loop then checkpoints). Default: nothing to prepare."""
        return False

    def preparation_charge(self) -> tuple[int, tuple[Event, ...]]:
        """What :meth:`prepare` will charge before training: a number of steps of the planned
        event (whose noise ``plan_noise`` chooses) and fixed events; the planner adds both, so a
        ``--target-epsilon`` covers the whole run. Default: nothing."""
        return 0, ()

    def after_step(self) -> None:  # noqa: B027 (an optional hook, a no-op by default)
        """Called after the optimizer applied a step (DP-MAC's controller). Default: nothing."""

    def planned_event(self) -> Event | None:
        """The accounting event the next step is expected to spend (``None`` for non-private
        methods); the loop checks the budget with it before the step. The event actually spent
        comes back in :attr:`StepOutput.privacy_event`."""
        return None

    def describe(self) -> dict[str, Any]:
        """Method-specific facts for the result record (noise multiplier, sensitivity, ...)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """Random-generator states and the like, for checkpoints."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:  # noqa: B027 (stateless by default)
        """Restore :meth:`state_dict`."""


class GaussianNoiseMethod(Method):
    """A private method adding Gaussian noise of std ``noise_std = z * Delta`` (noise multiplier
    times L2 sensitivity) and accounted by :meth:`event_for`; ``plan_noise`` picks ``z``."""

    needs_noise_choice = True
    noise_multiplier: float | None = None
    #: ``Delta``: L2 sensitivity of the noised quantity, set by the subclass.
    sensitivity: float = 0.0

    @abstractmethod
    def event_for(self, z: float) -> Event:
        """The accounting event of one step at noise multiplier ``z``."""

    def set_noise_multiplier(self, z: float) -> None:
        self.noise_multiplier = float(z)

    @property
    def noise_std(self) -> float:
        """Std of the Gaussian noise applied, ``z * Delta`` (the one place it is computed)."""
        if self.noise_multiplier is None:
            raise RuntimeError(f"{self.name}: noise multiplier not chosen yet (plan_noise sets it)")
        return self.noise_multiplier * self.sensitivity

    def planned_event(self) -> Event:
        if self.noise_multiplier is None:
            raise RuntimeError(f"{self.name}: noise multiplier not chosen yet (plan_noise sets it)")
        return self.event_for(self.noise_multiplier)


@dataclass
class ForwardPass:
    """The common opening of a DFA-family step: the trace, batch statistics and output error."""

    trace: Trace
    loss_sum: float
    correct: int
    error: torch.Tensor


def forward_and_error(model: MLP, x: torch.Tensor, y: torch.Tensor) -> ForwardPass:
    """Forward trace, summed loss, correct count and ``e = softmax(z^L) - onehot(y)`` (no grad)."""
    with torch.no_grad():
        trace = model.forward_trace(x)
        loss_sum, correct = batch_stats(trace.logits, y)
        return ForwardPass(trace, loss_sum, correct, output_error(trace.logits, y))


def batch_stats(logits: torch.Tensor, y: torch.Tensor) -> tuple[float, int]:
    """Summed cross-entropy and number of correct predictions."""
    loss = F.cross_entropy(logits, y, reduction="sum")
    return float(loss), int((logits.argmax(1) == y).sum())


def output_error(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-example error ``e = softmax(z^L) - onehot(y)`` (paper 002, eq. 2 at l = L)."""
    e = torch.softmax(logits, dim=1)
    e[torch.arange(y.shape[0], device=e.device), y] -= 1
    return e


def set_linear_grads(layer: torch.nn.Linear, delta: torch.Tensor, inputs: torch.Tensor) -> None:
    """``dW = delta^T h``, ``db = sum delta`` for a batch (paper 002, eq. 3-4)."""
    layer.weight.grad = delta.T @ inputs
    layer.bias.grad = delta.sum(0)
