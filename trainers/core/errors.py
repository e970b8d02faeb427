"""Errors of the training layer, printed by the CLI without a traceback."""

from __future__ import annotations

from opu_hal import OpuHalError


class TrainingConfigError(OpuHalError, ValueError):
    """A training configuration that cannot run: names the option and what is allowed."""


class CheckpointError(OpuHalError):
    """A checkpoint that cannot be written, read, or resumed from."""
