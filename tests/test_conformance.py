"""The device contract (``opu_hal.testing``), checked against every profile in device_profiles/,
and the suite itself checked against devices that break the contract.

A new backend is tested by adding its profile file: nothing here names a backend.
"""

from __future__ import annotations

from typing import Literal

import pytest

import opu_hal
from opu_hal import BackendSpec, BaseProfile, NoiseReport
from opu_hal.backends.torch_backend import TorchDevice
from opu_hal.testing import CHECKS, check_device, parametrize_checks, run_check
from tests.conftest import SHIPPED_PROFILES


@parametrize_checks()
@pytest.mark.parametrize("profile_path", SHIPPED_PROFILES, ids=[p.stem for p in SHIPPED_PROFILES])
def test_shipped_profile_conforms(profile_path, check):
    run_check(check, profile_path)


def test_every_shipped_profile_is_found_by_name_with_schema_and_description(profile_path):
    profile = opu_hal.load_profile(profile_path.stem)
    assert profile.source is not None and profile.source.resolve() == profile_path.resolve()
    assert profile.description, f"{profile_path.name}: `opu-hal devices` shows the description"
    assert "schema = 1" in profile_path.read_text().splitlines()


class LeakyProfile(BaseProfile):
    backend: Literal["leaky-test"]


class LeakyDevice(TorchDevice):
    """Reports a lower bound that grows with the input: accounting would depend on the data."""

    def __init__(self, profile: LeakyProfile) -> None:
        super().__init__(
            opu_hal.TorchProfile(
                backend="torch",
                in_features=profile.in_features,
                out_features=profile.out_features,
                device="cpu",
                noise_std=1.0,
            )
        )

    def _project(self, x):
        projection = super()._project(x)
        lower = min(1.0, 0.1 + float(x.abs().mean()))
        return opu_hal.Projection(projection.values, NoiseReport(std=1.0, std_lower=lower, source="software"))


def test_suite_rejects_a_device_whose_lower_bound_depends_on_the_input():
    opu_hal.register_backend(BackendSpec("leaky-test", LeakyProfile, LeakyDevice))
    try:
        profile = opu_hal.validate_profile({"backend": "leaky-test", "in_features": 6, "out_features": 8})
        with pytest.raises(AssertionError, match="noise_lower_bound_is_input_independent: sparse batch"):
            check_device(profile)
    finally:
        opu_hal.unregister_backend("leaky-test")


def test_check_device_reports_what_ran_and_what_did_not_apply():
    outcome = check_device("torch-cpu")
    assert set(outcome) == {c.name for c in CHECKS}
    assert outcome["input_limit_is_enforced"].startswith("not applicable")
    assert outcome["declared_noise_matches_repeated_projections"] == "passed"
