"""Observe a method's per-step noise alone, through its real code (see :mod:`trainers.audit.inspector`):
single-release methods release a zero update (``method.release_update``), the others compute
gradients on an empty batch (the clipped sum is zero, what remains is the noise). Each probe
returns the draws in the units of the charged law and the figures the ledger's event charges."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from opu_hal.privacy.mechanisms import DigitizedRelease, SkellamRelease

from ..run.loop import Trainer


@dataclass
class NoiseProbe:
    """Draws ``(steps, coordinates)`` of one mechanism's noise and what the ledger charges for it.

    ``law``: ``"gaussian"``, ``"skellam"`` (integer counts, lattice units) or ``"digitized"``.
    ``charged_std``: the noise std the charged event implies, in the draws' units.
    ``charged_multiplier``: noise std per unit of L2 sensitivity the event charges (``None`` where
    the event has no such figure); ``units_per_query``: the draws' units per update unit (the
    lattice's ``gamma``, else 1), to put the measured sensitivity in the same units."""

    mechanism: str
    law: str
    draws: np.ndarray
    charged_std: float
    charged_multiplier: float | None
    units_per_query: float = 1.0


def _event_multiplier(event: Any) -> float | None:
    """Noise std per unit of sensitivity that ``event`` charges: ``z`` for Gaussian events,
    ``sqrt(2 lambda) / Delta_2`` for Skellam events (both in the event's own units)."""
    if hasattr(event, "noise_multiplier"):
        return float(event.noise_multiplier)
    if hasattr(event, "poisson_mean") and hasattr(event, "l2_sensitivity"):
        return math.sqrt(2 * event.poisson_mean) / event.l2_sensitivity
    return None


def _release_probe(trainer: Trainer, steps: int) -> NoiseProbe:
    """dp-dfa / dp-sgd: ``release_update(0)`` at each step; lattice releases scaled to counts."""
    method: Any = trainer.method  # the probed methods' own attributes (dimension, sensitivity)
    event: Any = method.planned_event()
    mechanism = getattr(method, "mechanism", None)
    zero = torch.zeros(method.dimension, device=next(trainer.model.parameters()).device)
    draws = []
    for t in range(steps):
        method.current_step = t
        draws.append(method.release_update(zero).detach().cpu().double().numpy().copy())
    observed = np.stack(draws)
    if isinstance(mechanism, SkellamRelease):
        gamma = mechanism.lattice.gamma
        return NoiseProbe(
            "per-step noise (device Skellam counts)",
            "skellam",
            observed * gamma,
            math.sqrt(2 * event.poisson_mean),
            _event_multiplier(event),
            gamma,
        )
    if isinstance(mechanism, DigitizedRelease):
        gamma = mechanism.lattice.lattice.gamma
        return NoiseProbe(
            "per-step noise (device digitized reads)",
            "digitized",
            observed * gamma,
            mechanism.noise_std * gamma,
            None,
            gamma,
        )
    z = _event_multiplier(event)
    if z is None:
        raise TypeError(f"{type(event).__name__}: a software Gaussian release charges no noise multiplier")
    return NoiseProbe("per-step noise (software Gaussian)", "gaussian", observed, z * float(method.sensitivity), z)


def _empty_batch_probe(trainer: Trainer, steps: int) -> NoiseProbe:
    """dp-mac / dp-ulr (Gaussian mode): gradients of an empty batch, each layer's noise divided by
    the std its event charges (dp-mac: ``sigma sqrt(L) T_b,k / m``; dp-ulr: ``sigma_0 C / N_B``)."""
    method: Any = trainer.method  # dp-mac / dp-ulr: compute_gradients, model.layers
    split = trainer.train_split
    event: Any = method.planned_event()
    z = float(event.noise_multiplier)
    scales = _charged_layer_stds(method, z)
    x, y = split.x[:0], split.y[:0]
    draws = []
    for t in range(steps):
        method.current_step = t
        with torch.enable_grad():
            method.compute_gradients(x, y)
        parts = [
            torch.cat([layer.weight.grad.flatten(), layer.bias.grad.flatten()]) / scale
            for layer, scale in zip(method.model.layers, scales)
        ]
        draws.append(torch.cat(parts).detach().cpu().double().numpy())
    return NoiseProbe(f"per-step noise ({method.name}, Gaussian)", "gaussian", np.stack(draws), 1.0, None)


def _charged_layer_stds(method: Any, z: float) -> list[float]:
    m = method.context.config.batch_size
    if method.name == "dp-mac":
        bounds = method.bounds
        return [z * math.sqrt(len(bounds)) * b / m for b in bounds]
    return [z * method.context.config.clip_norm / method.normalizer for _ in method.model.layers]


def probe_noise(trainer: Trainer, steps: int = 4) -> NoiseProbe | None:
    """The per-step noise of ``trainer``'s method, or ``None`` where its charge is a published claim
    or an unbounded event (photonic-dp, dp-ulr's controller): no guarantee to hold it against."""
    method = trainer.method
    if not method.private or getattr(method, "claim", None) is not None:
        return None
    if method.single_release:
        return _release_probe(trainer, steps)
    if method.name in ("dp-mac", "dp-ulr"):
        return _empty_batch_probe(trainer, steps)
    return None
