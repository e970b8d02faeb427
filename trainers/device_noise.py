"""Gaussian noise drawn from a device's measurement noise (issue: DP-DFA ``--noise-source device``).

Two projections of the same input differ only by measurement noise, so ``(p1 - p2) / sqrt(2)``
has, per coordinate, the device's noise std and no mean to estimate. Divided by the report's
``std_lower`` it has std >= 1 in every coordinate; a mechanism scaling it by ``sigma`` adds noise
of std >= ``sigma`` and is accounted with ``sigma`` — never more than what was applied.
"""

from __future__ import annotations

import math

import torch

from opu_hal import Device, NoiseReport

from .errors import TrainingConfigError

MAX_ROWS = 512


def check_noise_source(device: Device) -> NoiseReport:
    """Refuse a device whose noise cannot serve a Gaussian mechanism; return its report."""
    label = device.profile.label
    if device.capabilities.output_kind != "linear":
        raise TrainingConfigError(f"--noise-source device: profile {label!r} has {device.capabilities.output_kind} "
                                  "output; its noise is not additive Gaussian (use mode = \"linear\")")
    report = device.noise_report()
    distribution = report.details.get("distribution", "gaussian")
    if distribution != "gaussian":
        raise TrainingConfigError(f"--noise-source device: profile {label!r} declares {distribution} noise, "
                                  "not Gaussian; the Gaussian mechanism cannot be accounted on it")
    if not (report.std_lower > 0 and math.isfinite(report.std_lower)):
        raise TrainingConfigError(
            f"--noise-source device: profile {label!r} reports noise std_lower = {report.std_lower}; a device "
            "with no measurement noise cannot supply privacy noise (use a noisy profile, e.g. opu-sim, or "
            "--noise-source software)")
    return report


class DeviceNoise:
    """Unit-scale noise vectors read from ``device`` by projecting a fixed reference input twice."""

    def __init__(self, device: Device, seed: int = 0) -> None:
        check_noise_source(device)
        self.device = device
        generator = torch.Generator().manual_seed(seed)
        reference = (torch.rand(device.in_features, generator=generator) < 0.5).float()
        reference[0] = 1.0  # never the all-zero pattern
        self.reference = reference
        self.last_report: NoiseReport | None = None
        self.projections = 0

    def standard(self, count: int) -> torch.Tensor:
        """``count`` values, each with std >= 1 (in units of the device's ``std_lower``)."""
        rows_needed = -(-count // self.device.out_features)
        chunks, lowest = [], math.inf
        while rows_needed > 0:
            rows = min(rows_needed, MAX_ROWS)
            batch = self.reference.expand(rows, -1)
            first, second = self.device.project(batch), self.device.project(batch)
            self.projections += 2
            lower = min(first.noise.std_lower, second.noise.std_lower)
            if not lower > 0:
                raise TrainingConfigError(f"profile {self.device.profile.label!r} reported zero noise mid-run")
            lowest = min(lowest, lower)
            chunks.append(((first.values - second.values) / math.sqrt(2)).flatten())
            self.last_report = first.noise
            rows_needed -= rows
        return torch.cat(chunks)[:count] / lowest
