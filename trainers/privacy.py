"""Glue between private methods and the accountant: choosing the noise for a target budget."""

from __future__ import annotations

from typing import Callable

from opu_hal.privacy import smallest_noise_multiplier

from .config import TrainConfig
from .methods.base import GaussianNoiseMethod, Method


def plan_noise(method: Method, steps: int, config: TrainConfig, log: Callable[[str], None]) -> None:
    """Give ``method`` the smallest noise multiplier whose planned run fits the target (inverse
    accounting), unless the user fixed ``--noise-multiplier``."""
    if not (isinstance(method, GaussianNoiseMethod)
            or (hasattr(method, "event_for") and hasattr(method, "set_noise_multiplier"))):
        return  # no noise to choose (photonic-dp's is the device's)
    if config.noise_multiplier is not None:
        method.set_noise_multiplier(config.noise_multiplier)
        return
    if config.target_epsilon is None:  # TrainConfig.validate refuses this for such methods
        raise AssertionError(f"{method.name}: neither --noise-multiplier nor --target-epsilon")
    z = smallest_noise_multiplier(method.event_for, steps, config.target_epsilon, config.delta,
                                  method.neighboring)  # type: ignore[arg-type]
    method.set_noise_multiplier(z)
    log(f"{method.name}: noise multiplier {z:.4f} reaches epsilon {config.target_epsilon} at delta "
        f"{config.delta} after the planned {steps} steps")
