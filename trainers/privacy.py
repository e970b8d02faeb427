"""Glue between private methods and the accountant: choosing the noise for a target budget."""

from __future__ import annotations

from typing import Callable

from opu_hal.privacy import smallest_noise_multiplier

from .config import TrainConfig
from .methods.base import Method


def plan_noise(method: Method, steps: int, config: TrainConfig, log: Callable[[str], None]) -> None:
    """Give ``method`` the smallest noise multiplier whose planned run fits the target (inverse
    accounting), unless the user fixed ``--noise-multiplier``."""
    event_for = getattr(method, "event_for", None)
    if event_for is None:
        return
    if config.noise_multiplier is not None:
        method.set_noise_multiplier(config.noise_multiplier)  # type: ignore[attr-defined]
        return
    assert config.target_epsilon is not None  # TrainConfig.validate guarantees it
    z = smallest_noise_multiplier(event_for, steps, config.target_epsilon, config.delta, method.neighboring)  # type: ignore[arg-type]
    method.set_noise_multiplier(z)  # type: ignore[attr-defined]
    log(f"{method.name}: noise multiplier {z:.4f} reaches epsilon {config.target_epsilon} at delta "
        f"{config.delta} after the planned {steps} steps")
