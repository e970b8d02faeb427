"""Output noise of an OPU projection from its camera's electron budget (one formula, two users).

The simulated device declares its noise with it from its own parameters; a calibration evaluates
it with measured ones. Per output pixel, with ``Phi`` the signal electrons with every mirror on,
``A^2`` the anchor electrons and ``F`` the per-frame floor (dark + read [+ ADC rounding]) in e-^2
(derivation in :mod:`opu_hal.backends.simulated.device`):

    intensity:  Var = (s + F) / Phi^2                       s = |z|^2 electrons of the frame
    linear:     Var = (s + A^2 + 3 F) / (2 A^2 Phi)          s = |z + a|^2 + |z|^2 electrons

Both decrease in ``Phi`` and ``A^2`` and increase in ``F``: a lower bound takes upper bounds of
``Phi`` and ``A^2`` and a lower bound of ``F``.
"""

from __future__ import annotations

from typing import Literal

import torch

Mode = Literal["linear", "intensity"]


def output_variance(
    mode: Mode, frames_signal_e: torch.Tensor | float, signal_e: float, anchor_e: float, floor_e2: float
) -> torch.Tensor | float:
    """Variance in output units of a value whose frames hold ``frames_signal_e`` electrons."""
    if mode == "intensity":
        return (frames_signal_e + floor_e2) / signal_e**2
    return (frames_signal_e + anchor_e + 3 * floor_e2) / (2 * anchor_e * signal_e)


def least_frames_e(mode: Mode, anchor_e: float) -> float:
    """Smallest frame electrons over all inputs: 0 (intensity), ``A^2 / 2`` (linear, z = -a/2)."""
    return 0.0 if mode == "intensity" else 0.5 * anchor_e


def typical_frames_e(mode: Mode, signal_e: float, anchor_e: float) -> float:
    """Frame electrons of an input with half the mirrors on (``E|z|^2 = Phi / 2``)."""
    half = 0.5 * signal_e
    return half if mode == "intensity" else 2 * half + anchor_e
