"""Errors of the training layer, printed by the CLI without a traceback."""

from __future__ import annotations

from opu_hal import OpuHalError


class TrainingConfigError(OpuHalError, ValueError):
    """A training configuration that cannot run: names the option and what is allowed."""


class CheckpointError(OpuHalError):
    """A checkpoint that cannot be written, read, or resumed from."""


class ArgumentError(TrainingConfigError):
    """An argument of the Python API outside its allowed range, or of the wrong kind: names both."""


class NonFiniteError(ArgumentError):
    """NaN or infinity in data, or in an update about to be released: refused, never released."""


class BatchMismatchError(TrainingConfigError):
    """The optimizer was asked to release an update of a batch other than the one the private loader drew."""


class OutputWriteError(CheckpointError):
    """An output could not be written; the message says where the privacy spent so far is recorded."""
