"""The Python API's argument checks, run at each entry point before anything is built or measured
(the primitives are :mod:`opu_hal.runtime.validation`'s, which the command line shares; the
calibration checks are ``opu-hal calibrate`` and ``opu-hal plan``'s own). Every refusal is an
:class:`ArgumentError` naming the argument and its allowed range."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from opu_hal import Device
from opu_hal.runtime.validation import MAX_SEED, choice, integer, real
from opu_hal.runtime.validation import planned_steps as check_planned_steps

from ..core.errors import ArgumentError, NonFiniteError

LOSS_REDUCTIONS = ("mean", "sum")
NOISE_SOURCES = ("software", "device")
ROUNDING_ANALYSES = ("per-coordinate", "worst-case")
#: The noise multipliers a run may use (as ``opu-hal account --noise-multiplier``).
NOISE_MULTIPLIER_RANGE = (1e-3, 1e6)
#: The largest clip bound or feedback norm (``max_grad_norm``, ``tau_h``, ``beta``): beyond it the
#: noise std ``z x sensitivity`` overflows the weights' float32 within a few steps.
MAX_BOUND = 1e6


def finite_real(name: str, value: Any, low: float = 0.0, *, low_open: bool = True, high: float | None = None) -> float:
    return real(name, value, low, high, low_open=low_open, error=ArgumentError)


def check_model_takes_data(module: nn.Module, first: Any) -> None:
    """Run ``module`` (in eval mode, without gradients, before hooks are installed) on the first examples
    of the data, on the module's device, so that a model and data that do not fit are refused here,
    naming both, not in the user's loop."""
    x = first[0] if isinstance(first, (tuple, list)) and first else first
    if not isinstance(x, torch.Tensor):
        return  # a dict or custom batch: the model's own call convention, not checked here
    modes = [(m, m.training) for m in module.modules()]
    parameter = next(module.parameters(), None)
    try:
        module.eval()  # no running statistics updated by the check
        with torch.no_grad():
            module(x if parameter is None else x.to(parameter.device))
    except Exception as exc:  # noqa: BLE001 - any failure of the user's model on the user's data is named
        raise ArgumentError(
            f"module and data_loader do not fit: the module fails on a batch of {len(x)} example(s) of shape "
            f"{tuple(x.shape[1:])} and dtype {x.dtype} ({type(exc).__name__}: {str(exc)[:200]})"
        ) from None
    finally:
        for m, training in modes:
            m.train(training)


def whole(name: str, value: Any, low: int, high: int | None = None) -> int:
    return integer(name, value, low, high, error=ArgumentError)


def one_of(name: str, value: Any, allowed: Sequence[str]) -> str:
    return choice(name, value, allowed, error=ArgumentError)


def planned_steps(steps: int, what: str) -> int:
    return check_planned_steps(steps, what, error=ArgumentError)


def check_device_argument(device: Any, name: str = "device") -> None:
    """A device, a profile name or path, or None."""
    if device is not None and not isinstance(device, (Device, str, os.PathLike)):
        raise ArgumentError(
            f"{name} must be an opu_hal Device, a profile name or a profile path, got {type(device).__name__}"
        )


def check_module(module: Any, name: str = "module") -> None:
    if not isinstance(module, nn.Module):
        raise ArgumentError(f"{name} must be a torch nn.Module, got {type(module).__name__}")


def check_make_private(args: dict[str, Any]) -> None:
    """Every argument of ``PrivacyEngine.make_private`` (by name) in its range, before anything is built."""
    check_module(args["module"])
    if not isinstance(args["optimizer"], torch.optim.Optimizer):
        raise ArgumentError(f"optimizer must be a torch.optim.Optimizer, got {type(args['optimizer']).__name__}")
    low, high = NOISE_MULTIPLIER_RANGE
    real("noise_multiplier", args["noise_multiplier"], low, high, error=ArgumentError)
    finite_real("max_grad_norm", args["max_grad_norm"], high=MAX_BOUND)
    one_of("loss_reduction", args["loss_reduction"], LOSS_REDUCTIONS)
    if not isinstance(args["method"], str):
        raise ArgumentError(f"method must be a string naming a method, got {type(args['method']).__name__}")
    one_of("noise_source", args["noise_source"], NOISE_SOURCES)
    check_device_argument(args["device"])
    if args["batch_size"] is not None:
        whole("batch_size", args["batch_size"], 1)
    finite_real("tau_h", args["tau_h"], high=MAX_BOUND)
    finite_real("beta", args["beta"], high=MAX_BOUND)
    real("lattice_resolution", args["lattice_resolution"], 0.5, 1000.0, error=ArgumentError)
    one_of("rounding_analysis", args["rounding_analysis"], ROUNDING_ANALYSES)
    whole("feedback_seed", args["feedback_seed"], 0, MAX_SEED)
    if args["public_dataset_size"] is not None:
        whole("public_dataset_size", args["public_dataset_size"], 1)
    if args["target_epsilon"] is not None:
        finite_real("target_epsilon", args["target_epsilon"])
    real("target_delta", args["target_delta"], 0.0, 1.0, low_open=True, high_open=True, error=ArgumentError)


def check_update(update: Any, noise_multiplier: float) -> None:
    """The private update has parameters to train and a finite noise std (else its hooks are removed)."""
    problem = None
    if not update.params:
        problem = "module has no trainable nn.Linear parameter: there is nothing to train privately"
    elif not math.isfinite(noise_multiplier * update.sensitivity):
        problem = f"the noise std (noise_multiplier x sensitivity {update.sensitivity:g}) is not finite"
    if problem is not None:
        update.remove()
        raise ArgumentError(problem)


def check_with_epsilon(target_epsilon: Any, target_delta: Any, epochs: Any) -> None:
    """``make_private_with_epsilon``'s own arguments (the rest are :func:`check_make_private`'s)."""
    finite_real("target_epsilon", target_epsilon)
    real("target_delta", target_delta, 0.0, 1.0, low_open=True, high_open=True, error=ArgumentError)
    whole("epochs", epochs, 1)


def check_attach(method: Any, threshold: Any, loss_reduction: Any, device: Any, offered: Sequence[str]) -> None:
    """``attach_dfa``'s arguments: a method it offers (names are lower case), ``threshold`` in [0, 1)
    as ``--threshold``, a loss reduction, a device or profile."""
    one_of("method", method, offered)
    real("threshold", threshold, 0.0, 1.0, high_open=True, error=ArgumentError)
    one_of("loss_reduction", loss_reduction, LOSS_REDUCTIONS)
    check_device_argument(device)


def check_finite_tensors(batch: Any, where: str) -> None:
    """Refuse NaN or infinity in any floating tensor of ``batch`` (a tensor, or a tuple, list or dict of them)."""
    parts: list[tuple[str, Any]]
    if isinstance(batch, dict):
        parts = [(str(k), v) for k, v in batch.items()]
    elif isinstance(batch, (tuple, list)):
        parts = [(str(i), v) for i, v in enumerate(batch)]
    else:
        parts = [("0", batch)]
    for label, part in parts:
        if isinstance(part, torch.Tensor) and (part.is_floating_point() or part.is_complex()):
            bad = int((~torch.isfinite(part)).sum())
            if bad:
                raise NonFiniteError(
                    f"{where}: tensor {label} holds {bad} NaN or infinite value(s); data must be finite "
                    "(a NaN input makes the weights NaN, and nothing NaN is released)"
                )


def reals(name: str, values: Any, low: float | None = None, *, low_open: bool = False) -> list[float] | None:
    """A sequence of distinct finite numbers (each one point of a calibration grid), or None."""
    if values is None:
        return None
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
        raise ArgumentError(f"{name} must be a non-empty list of numbers, got {values!r}")
    checked = [real(f"{name}[{i}]", v, low, low_open=low_open, error=ArgumentError) for i, v in enumerate(values)]
    if len(set(checked)) != len(checked):
        raise ArgumentError(f"{name} must hold distinct values (each is one calibrated point), got {checked}")
    return checked


def check_calibrate(args: dict[str, Any]) -> None:
    """``calibrate``'s arguments, before the device is opened or measured (its output path probed)."""
    from opu_hal.calibration.command_args import check_output

    check_device_argument(args["device"])
    reals("temperatures", args["temperatures"])
    reals("exposures", args["exposures"], 0.0, low_open=True)
    reals("dark_exposures", args["dark_exposures"], 0.0, low_open=True)
    whole("frames", args["frames"], 2, 100_000)
    whole("bootstrap", args["bootstrap"], 1, 1_000_000)
    whole("seed", args["seed"], 0, MAX_SEED)
    if args["out"] is not None:
        if not isinstance(args["out"], (str, os.PathLike)):
            raise ArgumentError(f"out must be a file path, got {type(args['out']).__name__}")
        check_output(os.fspath(args["out"]), "out")


def check_plan(args: dict[str, Any]) -> int:
    """``plan``'s numbers in range; returns the planned steps (``steps``, or ``epochs`` of the dataset)."""
    from opu_hal.calibration.schema import Calibration
    from opu_hal.privacy.events import PrivacyParameterError
    from opu_hal.privacy.run_shape import SAMPLINGS, steps_for

    if not isinstance(args["calibration"], (Calibration, str, os.PathLike)):
        raise ArgumentError(
            f"calibration must be a Calibration or a file path, got {type(args['calibration']).__name__}"
        )
    if not isinstance(args["profile"], (str, os.PathLike)):
        raise ArgumentError(f"profile must be a profile name or path, got {type(args['profile']).__name__}")
    finite_real("target_epsilon", args["target_epsilon"])
    real("delta", args["delta"], 0.0, 1.0, low_open=True, high_open=True, error=ArgumentError)
    n = whole("dataset_size", args["dataset_size"], 2)
    m = whole("batch_size", args["batch_size"], 1, n)
    epochs = None if args["epochs"] is None else finite_real("epochs", args["epochs"])
    steps = None if args["steps"] is None else whole("steps", args["steps"], 1)
    one_of("mechanism", args["mechanism"], ("skellam", "digitized", "gaussian"))
    one_of("sampling", args["sampling"], SAMPLINGS)
    one_of("rounding_analysis", args["rounding_analysis"], ROUNDING_ANALYSES)
    real("lattice_resolution", args["lattice_resolution"], 0.5, 1000.0, error=ArgumentError)
    if args["dimension"] is not None:
        whole("dimension", args["dimension"], 1)
    if args["model"] is not None:
        check_module(args["model"], "model")
    if args["sensitivity"] is not None:
        finite_real("sensitivity", args["sensitivity"])
    try:
        planned = steps_for(n, m, epochs=1.0 if epochs is None else epochs, steps=steps)
    except PrivacyParameterError as exc:
        raise ArgumentError(str(exc)) from None
    return planned_steps(planned, f"plan: {'steps' if steps is not None else 'epochs'} at batch {m} of {n}")
