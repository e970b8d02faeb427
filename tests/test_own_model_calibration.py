"""calibrate / plan / calibrated_device from Python (trainers.api.calibration)."""

from __future__ import annotations

import math
import shutil

import pytest
import torch
from torch import nn

from opu_hal.calibration.anchor_map import anchor_map_path
from opu_hal.calibration.schema import read_calibration, write_calibration
from opu_hal.contract.errors import CalibrationError
from opu_hal.privacy.run_shape import RunShape
from opu_hal.privacy.skellam import required_poisson_mean
from tests.training_helpers import private_dfa_on_device, train_own_model
from trainers.api import PrivacyEngine, calibrate, calibrated_device, plan
from trainers.core.errors import TrainingConfigError


@pytest.fixture(scope="module")
def calibration_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("cal") / "cal.json"
    calibration = calibrate("opu-sim-dp", temperatures=[20.0, 30.0], frames=8, bootstrap=50, out=path)
    return path, calibration


def proving_unity(calibration):
    """The calibration with a gain interval narrow enough to prove unity (the Skellam route's rule; a speckle
    calibration that does not prove it takes the digitized route, tests/test_speckle_digitized.py)."""
    full = calibration.saturation_e.upper
    gain = calibration.gain_e_per_dn.model_copy(update={"value": 1.0, "lower": 1 - 0.4 / full, "upper": 1 + 0.4 / full})
    return calibration.model_copy(update={"gain_e_per_dn": gain})


def test_calibrate_writes_the_file_it_returns(calibration_file):
    path, calibration = calibration_file
    assert read_calibration(path) == calibration
    assert calibration.temperatures_c == [20.0, 30.0]


def test_plan_counts_steps_from_epochs_and_the_dimension_from_the_model(calibration_file):
    path, calibration = calibration_file
    model = nn.Sequential(nn.Linear(20, 16), nn.Sigmoid(), nn.Linear(16, 10))
    with pytest.raises(CalibrationError, match="does not prove unity gain"):  # the Skellam plan's rule
        plan(path, "opu-sim-dp", 3.0, 1e-5, dataset_size=600, batch_size=32, epochs=2.5, model=model)
    points = plan(
        proving_unity(calibration), "opu-sim-dp", 3.0, 1e-5, dataset_size=600, batch_size=32, epochs=2.5, model=model
    )
    steps = math.ceil(2.5 * 600 / 32)
    assert points[0].frames_total == points[0].frames_per_step * steps
    shape = RunShape(
        sampling="fixed",
        dataset_size=600,
        batch_size=32,
        steps=steps,
        sensitivity=1.0,
        dimension=20 * 16 + 16 + 16 * 10 + 10,
        lattice_resolution=10.0,
        rounding_analysis="per-coordinate",
    )
    assert points[0].needed == pytest.approx(required_poisson_mean(3.0, 1e-5, shape))
    assert [p.reaches_target for p in points] == sorted((p.reaches_target for p in points), reverse=True)
    with pytest.raises(TrainingConfigError, match="model= or dimension="):
        plan(calibration, "opu-sim-dp", 3.0, 1e-5, dataset_size=600, batch_size=32)


def test_a_calibrated_device_serves_dp_dfa_device_noise(calibration_file):
    path, calibration = calibration_file
    unity = path.with_name("unity.json")  # the Skellam route, which is seconds to plan (the digitized: minutes)
    write_calibration(proving_unity(calibration), unity)
    shutil.copy(anchor_map_path(path), anchor_map_path(unity))
    device = calibrated_device("opu-sim-dp", unity)
    assert device.noise_report().source == "calibrated"
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 16), nn.Sigmoid(), nn.Linear(16, 10))
    x, y = torch.randn(64, 20), torch.randint(0, 10, (64,))
    engine = PrivacyEngine()
    model, optimizer, loader = private_dfa_on_device(engine, model, (x, y), device)
    assert train_own_model(loader, model, optimizer) == 4
    assert engine.steps == 4 and optimizer.mechanism.distribution is not None


def test_the_speckle_anchor_map_is_read_once_until_its_file_changes(calibration_file):
    """A device-noise step reads the per-pixel map of the anchor; reading its 50 MB file at every step
    made a main-job step ten times slower. It is read again only when the file changes."""
    import os

    import opu_hal
    from opu_hal.calibration.anchor_map import anchor_map_path
    from opu_hal.calibration.calibrated import load_calibrated_noise

    path, _ = calibration_file
    profile = opu_hal.load_profile("opu-sim-dp")
    noise = load_calibrated_noise(path, profile)
    first = noise.anchor_map(profile.temperature_c, profile.exposure_us)
    assert first is not None
    assert noise.anchor_map(profile.temperature_c, profile.exposure_us) is first
    stat = anchor_map_path(noise.path).stat()
    os.utime(anchor_map_path(noise.path), ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    again = noise.anchor_map(profile.temperature_c, profile.exposure_us)
    assert again is not first and (again.lower_e == first.lower_e).all()
