"""Shared fixtures: every shipped profile."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PROFILE_DIR = REPO / "device_profiles"
SHIPPED_PROFILES = sorted(PROFILE_DIR.glob("*.toml"))


@pytest.fixture(params=SHIPPED_PROFILES, ids=[p.stem for p in SHIPPED_PROFILES])
def profile_path(request: pytest.FixtureRequest) -> Path:
    return request.param
