"""Feedback projections ``B e`` for DFA, requested from an opu_hal device (paper 000, eq. 4-5).

One projection serves every hidden layer at once: the device's output is cut into consecutive
slices, one per hidden layer (``out_features >= sum of hidden widths``). A device with more inputs
than classes sees the error padded with zeros, which selects the first columns of its ``B``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from opu_hal import Device, NoiseReport, project_ternary

from .errors import TrainingConfigError


def ternarize(e: torch.Tensor, threshold: float) -> torch.Tensor:
    """``sign(e)`` where ``|e| > threshold``, else 0 (paper 000, section 4)."""
    return torch.sign(e) * (e.abs() > threshold).to(e.dtype)


def check_device_fits(device: Device, n_classes: int, hidden: list[int], *, ternary: bool) -> None:
    """Refuse a device too small for the model, or whose input kind cannot carry the error."""
    label = device.profile.label
    needed_out = sum(hidden)
    if device.in_features < n_classes or device.out_features < needed_out:
        raise TrainingConfigError(
            f"profile {label!r} projects {device.in_features} -> {device.out_features}, but this model "
            f"needs in_features >= {n_classes} (classes) and out_features >= {needed_out} (sum of hidden "
            f"widths {hidden}); use or write a profile with in_features = {n_classes} and "
            f"out_features = {needed_out}"
        )
    caps = device.capabilities
    if caps.output_kind != "linear":
        raise TrainingConfigError(
            f'profile {label!r} returns {caps.output_kind} output; DFA needs a linear projection (set mode = "linear")'
        )
    if not ternary and not caps.accepts("real"):
        raise TrainingConfigError(
            f"profile {label!r} takes {caps.input_kind} input; method 'dfa' projects a real-valued "
            f"error: use method 'pdfa' (ternarized error in two passes) or a torch profile"
        )


@dataclass
class FeedbackProjection:
    """Per-layer slices of ``B e`` and the device's noise report for them."""

    slices: list[torch.Tensor]
    noise: NoiseReport


class DeviceFeedback:
    """Projects an error batch ``(m, classes)`` through ``device`` and slices it per hidden layer."""

    def __init__(
        self, device: Device, n_classes: int, hidden: list[int], *, ternary: bool, threshold: float = 0.15
    ) -> None:
        check_device_fits(device, n_classes, hidden, ternary=ternary)
        self.device = device
        self.n_classes = n_classes
        self.hidden = list(hidden)
        self.ternary = ternary
        self.threshold = threshold

    def project(self, e: torch.Tensor) -> FeedbackProjection:
        signal = ternarize(e, self.threshold) if self.ternary else e
        if self.device.in_features > self.n_classes:
            signal = torch.nn.functional.pad(signal, (0, self.device.in_features - self.n_classes))
        signal = signal.to(self.device.capabilities.compute_device)
        projection = project_ternary(self.device, signal) if self.ternary else self.device.project(signal)
        values = projection.values.to(e.device, e.dtype)
        slices, start = [], 0
        for width in self.hidden:
            slices.append(values[:, start : start + width])
            start += width
        return FeedbackProjection(slices=slices, noise=projection.noise)
