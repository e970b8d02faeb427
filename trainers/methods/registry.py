"""The one registration of a training method, read by every surface that offers methods.

A :class:`MethodSpec` says what each surface needs to know: the CLI's ``--method`` choices and
config validation (:data:`METHODS`), the Python API (``make_private``'s update for a user's model,
or the reason it is not offered; ``attach_dfa``'s default profile), torchrun (the reason a
distributed run refuses it) and the audit (private methods: black-box; single-release methods:
white-box). A new method is one module (its :class:`~.base.Method` subclass) and one
:func:`register_method` call.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from ..core.errors import TrainingConfigError
from .base import Method

#: ``make_private``'s updates of a user's model (``trainers.api.updates``): per-example clipping of
#: every ``nn.Linear`` (DP-SGD) or DFA signals with clipped error and layer inputs (DP-DFA).
USER_UPDATES = ("per-example-clipping", "dfa-clipping")
#: Where a private method's noise may come from (``--noise-source``, ``make_private(noise_source=)``).
NOISE_SOURCES = ("software", "device")


@dataclass(frozen=True)
class MethodSpec:
    """What the CLI, config, Python API, torchrun and audit read about one method.

    The privacy events it charges are the trainer's own (``planned_event`` and each step's
    ``StepOutput.privacy_event``), so the spec names none; it carries only what a surface outside
    the trainer needs to offer, refuse or audit the method.
    """

    trainer: type[Method]
    #: Noise sources the method accepts (empty for a method that adds no noise).
    noise_sources: tuple[str, ...] = ()
    #: ``make_private``'s update for a user's model (one of :data:`USER_UPDATES`); ``None``: not offered.
    user_update: str | None = None
    #: Why ``make_private`` does not offer a private method (shown to the user).
    api_refusal: str | None = None
    #: Profile ``attach_dfa`` opens when the caller names no device; ``None``: not offered by attach_dfa.
    attach_profile: str | None = None
    #: Why a torchrun run with several ranks refuses the method; ``None``: it distributes.
    distributed_refusal: str | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.trainer, type) and issubclass(self.trainer, Method) and self.trainer.name):
            raise TrainingConfigError(f"register_method needs a Method subclass with a name, got {self.trainer!r}")
        unknown = sorted(set(self.noise_sources) - set(NOISE_SOURCES))
        if unknown:
            raise TrainingConfigError(
                f"method {self.trainer.name!r}: noise_sources {unknown}: choose from {', '.join(NOISE_SOURCES)}"
            )
        if self.user_update is not None and self.user_update not in USER_UPDATES:
            raise TrainingConfigError(
                f"method {self.trainer.name!r}: user_update {self.user_update!r}: choose one "
                f"of {', '.join(USER_UPDATES)} or None"
            )
        if self.user_update is not None and not self.trainer.private:
            raise TrainingConfigError(f"method {self.trainer.name!r}: user_update is for private methods")
        if self.attach_profile is not None and not hasattr(self.trainer, "ternary"):
            raise TrainingConfigError(
                f"method {self.trainer.name!r}: attach_profile is for DFA methods (a trainer "
                "with ternary and check_device, as trainers.methods.dfa.DFA)"
            )

    @property
    def audits(self) -> tuple[str, ...]:
        """The audits that cover the method: black-box for every private one, white-box (and
        multi-run) for those with one noisy release per step."""
        if not self.trainer.private:
            return ()
        return ("black-box", "white-box") if self.trainer.single_release else ("black-box",)


#: Every registered method by name, in registration order.
SPECS: dict[str, MethodSpec] = {}


class _Trainers(Mapping[str, "type[Method]"]):
    """Every registered method's trainer class by name: a read-only view of :data:`SPECS`."""

    def __getitem__(self, name: str) -> type[Method]:
        return SPECS[name].trainer

    def __iter__(self) -> Iterator[str]:
        return iter(SPECS)

    def __len__(self) -> int:
        return len(SPECS)


#: Every registered method's trainer class by name (the view the loop and config read).
METHODS: Mapping[str, type[Method]] = _Trainers()


def register_method(
    cls: type[Method],
    *,
    noise_sources: tuple[str, ...] = (),
    user_update: str | None = None,
    api_refusal: str | None = None,
    attach_profile: str | None = None,
    distributed_refusal: str | None = None,
    replace: bool = False,
) -> type[Method]:
    """Make ``cls`` a method of every surface under ``cls.name`` (CLI, config,
    :func:`trainers.run.loop.train`, ``make_private``/``attach_dfa``, torchrun, audit)."""
    spec = MethodSpec(cls, tuple(noise_sources), user_update, api_refusal, attach_profile, distributed_refusal)
    if spec.trainer.name in SPECS and SPECS[spec.trainer.name] != spec and not replace:
        raise TrainingConfigError(f"method {spec.trainer.name!r} is already registered; pass replace=True")
    SPECS[spec.trainer.name] = spec
    return cls


def unregister_method(name: str) -> None:
    """Remove a method added with :func:`register_method`."""
    SPECS.pop(name, None)


def method_names() -> tuple[str, ...]:
    return tuple(SPECS)


def get_spec(name: str) -> MethodSpec:
    """The registration of ``name``; :class:`TrainingConfigError` lists the others."""
    if name not in SPECS:
        raise TrainingConfigError(f"--method {name!r}: choose one of {', '.join(SPECS)}")
    return SPECS[name]


def get_method(name: str) -> type[Method]:
    """The trainer class registered as ``name``; :class:`TrainingConfigError` lists the others."""
    return get_spec(name).trainer
