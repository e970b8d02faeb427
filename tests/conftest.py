"""Shared fixtures: every shipped profile. Under pytest-xdist (``scripts/test.sh`` with no arguments), each
worker and the commands it starts compute on one thread: one worker per core, so more threads only contend."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parent.parent
PROFILE_DIR = REPO / "device_profiles"
SHIPPED_PROFILES = sorted(PROFILE_DIR.glob("*.toml"))


@pytest.fixture(params=SHIPPED_PROFILES, ids=[p.stem for p in SHIPPED_PROFILES])
def profile_path(request: pytest.FixtureRequest) -> Path:
    return request.param
