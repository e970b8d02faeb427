"""Ternary inputs on binary-input devices: ``B e = B e+ - B e-`` in two passes (paper 000, eq. 7).

DFA's ternarized error ``e in {-1, 0, 1}`` cannot go on a DMD directly. Its positive and negative
parts are projected separately; the two reads are independent, so the noise of the difference has
variance ``std_+^2 + std_-^2`` (and likewise for the lower bounds).

When both parts fit in one batch (``capabilities.max_batch``), they go to the device as one batch of
``2n`` rows: the same frames, half the calls. A report's variance is that of the batch's mean frame
signal and is linear in it, so the one report of the stacked batch, counted twice, has the variance
``std_+^2 + std_-^2`` of the two separate reports.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .capabilities import Capabilities
from .device import Device
from .errors import InputError
from .inputs import as_batch, check_batch
from .noise import NoiseReport, Projection

_TERNARY = Capabilities(
    input_kind="ternary",
    output_kind="linear",
    max_in_features=None,
    max_out_features=None,
)


def project_ternary(device: Device[Any], e: Any) -> Projection:
    """Project a ternary batch on any linear device, in two passes when it is binary-input."""
    if device.capabilities.output_kind != "linear":
        raise InputError(
            f"ternary projection needs a linear-output device; {device.profile.label!r} returns "
            f'{device.capabilities.output_kind} (use a profile with mode = "linear")'
        )
    batch = check_batch(as_batch(e), device.in_features, _TERNARY)
    if device.capabilities.accepts("ternary"):
        return device.project(batch)
    rows, limit = batch.shape[0], device.capabilities.max_batch
    if limit is None or 2 * rows <= limit:
        both = device.project(torch.cat([(batch > 0), (batch < 0)]).to(batch.dtype))
        return Projection(
            values=both.values[:rows] - both.values[rows:], noise=combine_independent(both.noise, both.noise)
        )
    positive = device.project((batch > 0).to(batch.dtype))
    negative = device.project((batch < 0).to(batch.dtype))
    return Projection(
        values=positive.values - negative.values,
        noise=combine_independent(positive.noise, negative.noise),
    )


def combine_independent(first: NoiseReport, second: NoiseReport) -> NoiseReport:
    """Noise of the sum or difference of two independent reads of the same device."""
    source = first.source if first.source == second.source else "declared"
    return NoiseReport(
        std=math.hypot(first.std, second.std),
        std_lower=math.hypot(first.std_lower, second.std_lower),
        source=source,
        temperature_c=first.temperature_c,
        exposure_us=first.exposure_us,
        passes=first.passes + second.passes,
        details=dict(first.details),
    )
