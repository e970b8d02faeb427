"""Shared helpers: every shipped profile, and valid batches for any device."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import opu_hal
from opu_hal import Device

REPO = Path(__file__).resolve().parent.parent
PROFILE_DIR = REPO / "device_profiles"
SHIPPED_PROFILES = sorted(PROFILE_DIR.glob("*.toml"))


def valid_batch(device: Device, n: int, seed: int = 0) -> torch.Tensor:
    """A batch of ``n`` rows of the kind the device accepts (0/1, -1/0/1 or Gaussian)."""
    generator = torch.Generator().manual_seed(seed)
    shape = (n, device.in_features)
    kind = device.capabilities.input_kind
    if kind == "real":
        return torch.randn(shape, generator=generator)
    low = -1 if kind == "ternary" else 0
    return torch.randint(low, 2, shape, generator=generator).float()


def open_or_skip(path: Path) -> Device:
    """Load a shipped profile's device; hardware profiles skip with the reason when absent."""
    profile = opu_hal.load_profile(path)
    try:
        return opu_hal.load_device(profile)
    except opu_hal.DeviceUnavailable as exc:
        if profile.requires_hardware:
            pytest.skip(f"{path.name} needs hardware: {exc}")
        raise


@pytest.fixture(params=SHIPPED_PROFILES, ids=[p.stem for p in SHIPPED_PROFILES])
def profile_path(request: pytest.FixtureRequest) -> Path:
    return request.param


@pytest.fixture
def device(profile_path: Path):
    dev = open_or_skip(profile_path)
    yield dev
    dev.close()
