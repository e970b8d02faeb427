"""Every error a user can trigger is an OpuHalError that also keeps its built-in kind."""

from __future__ import annotations

import pytest

from opu_hal import NoiseReport, OpuHalError
from opu_hal.privacy import GaussianEvent
from trainers.core.data import load_dataset
from trainers.core.model import MLP, get_activation


@pytest.mark.parametrize(
    "trigger",
    [
        lambda: GaussianEvent(noise_multiplier=-1.0),
        lambda: load_dataset("no-such-dataset"),
        lambda: get_activation("softsign"),
        lambda: MLP([3]),
        lambda: NoiseReport(std=1.0, std_lower=2.0, source="software"),
    ],
    ids=["privacy-parameter", "dataset", "activation", "mlp-sizes", "noise-report"],
)
def test_user_errors_are_opu_hal_errors_and_value_errors(trigger):
    with pytest.raises(OpuHalError) as info:
        trigger()
    assert isinstance(info.value, ValueError)
