"""The digitized box's curves kept on disk: a stored curve equals the direct computation and is read
back under a key naming every input; a malformed entry is never used."""

from __future__ import annotations

import json

import numpy as np
import pytest

from opu_hal.privacy import digitized_cache, digitized_events
from opu_hal.privacy.digitized import CameraRead

CAMERAS = (CameraRead(20.0, 1.5, 1.0, 8, 2.0, 200.0), CameraRead(24.0, 1.5, 1.0, 8, 2.0, 200.0))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OPU_HAL_CACHE", str(tmp_path))
    monkeypatch.setattr(digitized_cache, "STORE_AFTER_S", 0.0)  # store every curve
    return tmp_path / digitized_cache.CACHE_FOLDER


def _direct(cameras=CAMERAS, reads=1, max_shift=2):
    return digitized_events.box_coefficients.__wrapped__(cameras, reads, max_shift)  # past the in-process cache


def _refuse(*args):
    raise AssertionError("the stored curve should have been read")


def test_a_stored_box_curve_equals_the_direct_computation(cache, monkeypatch):
    kappa, tau = _direct()
    assert list(cache.iterdir())  # it was stored
    monkeypatch.setattr(digitized_events, "digitized_coefficients", _refuse)
    again, tau_again = _direct()
    assert np.array_equal(again, kappa) and tau_again == tau and not again.flags.writeable
    assert np.isinf(again[:2]).all() and np.isfinite(again[2:]).all()


def test_the_key_names_the_cameras_the_reads_and_the_shift():
    keys = {
        digitized_cache.box_key(CAMERAS, 1, 2),
        digitized_cache.box_key(CAMERAS[:1], 1, 2),
        digitized_cache.box_key(CAMERAS, 2, 2),
        digitized_cache.box_key(CAMERAS, 1, 3),
        digitized_cache.box_key((CAMERAS[0], CameraRead(24.0, 1.5, 1.0, 8, 2.0, 200.000001)), 1, 2),
    }
    assert len(keys) == 5


@pytest.mark.parametrize("tamper", ["negative", "short", "nan_tau"])
def test_a_malformed_entry_is_never_used(cache, tamper):
    kappa, tau = _direct()
    (entry,) = cache.iterdir()
    stored = json.loads(entry.read_text())
    if tamper == "negative":
        stored["value"]["from_2"][5] = -1.0
    elif tamper == "short":
        stored["value"]["from_2"] = stored["value"]["from_2"][:-1]
    else:
        stored["value"]["tau"] = float("nan")
    entry.write_text(json.dumps(stored))
    assert digitized_cache.read_box(CAMERAS, 1, 2) is None
    again, tau_again = _direct()
    assert np.array_equal(again, kappa) and tau_again == tau
