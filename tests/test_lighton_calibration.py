"""Calibrating the LightOn backend through lightonml's own device seam (issue 36).

The SDK's ``opu_device`` seam takes any object whose class is named ``SimulatedOpuDevice``; the
noisy fake camera below subclasses lightonml's simulated device under that name and replaces
``transform1`` (what ``OPU.transform`` calls) with a camera: Poisson photo-electrons of the speckle
(and of a coherent reference beam), dark current, read noise, gain, black level, 8-bit clipping.
It adds the two controls lightonml 1.4.3 lacks (``laser_on``, ``reference_power_uw``). Frames
flow through the SDK's real ``OPU.fit1d``/``OPU.transform``/``TransformRunner`` code.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from lightonml.internal import simulated_device

import opu_hal
from opu_hal import LightonProfile
from opu_hal.backends.lighton import LightonDevice
from opu_hal.backends.lighton_frames import LIGHT_SPEED_M_S, PLANCK_J_S
from opu_hal.calibration.calibrated import load_calibrated_noise
from opu_hal.calibration.export_frames import export_frames
from opu_hal.calibration.schema import read_calibration
from opu_hal.cli import main as opu_main
from opu_hal.contract.errors import CalibrationError, DeviceUnavailable

# The fake camera's hidden truth (never read by the code under test).
TRUTH = dict(
    gain_e_per_dn=6.0,
    read_noise_e=8.0,
    black_level_dn=10,
    quantum_efficiency=0.5,
    dark_e_per_s=60.0,
    full_well_e=20_000.0,
)
PIXELS = 2040 * 1088  # the profile's sensor_pixels default


def electrons(power_uw: float, exposure_us: float) -> float:
    photon = PLANCK_J_S * LIGHT_SPEED_M_S / 532e-9
    return TRUTH["quantum_efficiency"] * power_uw * 1e-6 * exposure_us * 1e-6 / photon / PIXELS


class SimulatedOpuDevice(simulated_device.SimulatedOpuDevice):
    """A noisy 8-bit camera behind lightonml's simulated OPU (the name the SDK's seam accepts)."""

    laser_power_uw = 0.6

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.laser_on = True
        self.reference_power_uw = 0.0
        self._rng = np.random.default_rng(12345)

    @property
    def output_dtype(self):
        return np.uint8

    def transform1(self, X):
        if self._linear:  # lightonml's own linear path: no camera behind it
            return super().transform1(X)
        exposure = float(self.exposure_us)
        field = np.zeros((X.shape[0], self._random_matrix.shape[1]), dtype=np.complex128)
        if self.laser_on:
            phi = electrons(self.laser_power_uw, exposure)
            field = math.sqrt(phi / 2) * (X.astype(np.float64) @ self._random_matrix[: X.shape[1]])
            field = field + math.sqrt(electrons(self.reference_power_uw, exposure))
        signal = np.abs(field) ** 2 + TRUTH["dark_e_per_s"] * exposure * 1e-6
        e = np.minimum(self._rng.poisson(signal), TRUTH["full_well_e"]) + self._rng.normal(
            0.0, TRUTH["read_noise_e"], signal.shape
        )
        dn = np.round(e / TRUTH["gain_e_per_dn"]) + TRUTH["black_level_dn"]
        return np.clip(dn, 0, 255).astype(np.uint8)


KEYS = dict(
    backend="lighton",
    in_features=10,
    out_features=256,
    simulated=True,
    mode="linear",
    seed=3,
    exposure_us=400.0,
    temperature_c=30.0,
    laser_power_uw=0.6,
    anchor_power_uw=0.6,
    retries=0,
    timeout_s=60.0,
    backoff_s=0.0,
)


def toml(path, **overrides):
    keys = {"schema": 1, **KEYS, **overrides}
    lines = [f"{k} = {json.dumps(v) if not isinstance(v, bool) else str(v).lower()}" for k, v in keys.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def camera(monkeypatch):
    """lightonml builds the fake camera wherever it would build its simulated device."""
    monkeypatch.setattr(simulated_device, "SimulatedOpuDevice", SimulatedOpuDevice)


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """`opu-hal calibrate` of the fake camera through the CLI (the camera patched for the module)."""
    folder = tmp_path_factory.mktemp("lighton-cal")
    profile = toml(folder / "lighton-camera.toml")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(simulated_device, "SimulatedOpuDevice", SimulatedOpuDevice)
        code = opu_main(["calibrate", str(profile), "--frames", "16", "--quiet", "--out", str(folder / "cal.json")])
    assert code == 0
    return folder, profile, read_calibration(folder / "cal.json")


def test_calibrate_through_the_sdk_recovers_the_hidden_camera(calibrated):
    _, _, cal = calibrated
    assert cal.device.backend == "lighton" and cal.temperatures_c == [30.0]
    for estimate, truth in (
        (cal.gain_e_per_dn, TRUTH["gain_e_per_dn"]),
        (cal.read_noise_e, TRUTH["read_noise_e"]),
        (cal.black_level_dn, TRUTH["black_level_dn"]),
        (cal.quantum_efficiency, TRUTH["quantum_efficiency"]),
    ):
        assert estimate.value == pytest.approx(truth, rel=0.1)
    assert cal.saturation_limited_by == "adc"  # the 8-bit ADC clips before the full well


def test_calibrated_projection_is_the_sdk_matrix_with_the_reported_noise(calibrated, camera):
    folder, profile, _ = calibrated
    x = (torch.rand(1, 10, generator=torch.Generator().manual_seed(1)) < 0.5).float()
    with opu_hal.load_device(profile, calibration=folder / "cal.json") as device:
        report = device.noise_report()
        values = torch.cat([device.project(x).values for _ in range(60)])
        truth = x.numpy() @ device.opu.device.random_matrix.real
    assert report.source == "calibrated" and report.temperature_c == 30.0
    residual = values.numpy() - truth
    assert abs(residual.mean()) < 4 * report.std / math.sqrt(residual.size)
    assert report.std_lower <= residual.std() <= 1.25 * report.std


def test_train_with_the_lighton_calibration_reports_its_noise(calibrated, camera, tmp_path):
    from trainers.cli import main as train_main

    folder, profile, _cal = calibrated
    out = tmp_path / "run.json"
    code = train_main(
        [
            "train",
            "--method",
            "photonic-dp",
            "--profile",
            str(profile),
            "--dataset",
            "digits",
            "--epochs",
            "1",
            "--hidden",
            "16",
            "--batch-size",
            "64",
            "--train-limit",
            "256",
            "--calibration",
            str(folder / "cal.json"),
            "--quiet",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    record = json.loads(out.read_text())
    expected = load_calibrated_noise(folder / "cal.json", LightonProfile(**KEYS)).report(30.0)
    seen = [entry["operating_point"] for entry in record["noise_reports"]]
    # the ternarized error is projected in two passes (e+ and e-): their noises add in quadrature
    assert seen and all(
        p["source"] == "calibrated"
        and p["temperature_c"] == 30.0
        and p["passes"] == 2
        and p["std_lower"] == pytest.approx(math.sqrt(2) * expected.std_lower)
        for p in seen
    )


def test_a_calibration_not_covering_the_declared_temperature_is_refused(calibrated, camera, tmp_path):
    folder, _, _ = calibrated
    warmer = toml(tmp_path / "warm.toml", temperature_c=45.0)
    with pytest.raises(CalibrationError, match=r"temperature 45.0 C is outside the calibrated range \[30.0, 30.0\]"):
        opu_hal.load_device(warmer, calibration=folder / "cal.json")


def test_a_temperature_other_than_the_declared_one_cannot_be_calibrated(camera, tmp_path, capsys):
    code = opu_main(
        [
            "calibrate",
            str(toml(tmp_path / "p.toml")),
            "--temperatures",
            "30",
            "80",
            "--frames",
            "4",
            "--quiet",
            "--out",
            str(tmp_path / "c.json"),
        ]
    )
    assert code == 2 and "temperature_c = 80.0 is outside its allowed range [30.0, 30.0]" in capsys.readouterr().err


def test_lighton_simulated_profile_is_refused_naming_the_missing_keys(tmp_path, capsys):
    assert opu_main(["calibrate", "lighton-simulated", "--out", str(tmp_path / "c.json")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "temperature_c" in err and "laser_power_uw" in err and "lightonml" in err


def test_the_sdks_noiseless_simulated_device_gives_no_raw_frames():
    device = LightonDevice(LightonProfile(**KEYS))  # the SDK's own SimulatedOpuDevice: float32, no camera
    with device, pytest.raises(DeviceUnavailable, match="returns float32 values, not camera DN"):
        device.raw_frames("dark", 2)


def test_dark_and_anchor_frames_need_the_laser_switch_and_reference_beam_the_sdk_lacks(tmp_path):
    class SimulatedOpuDevice(simulated_device.SimulatedOpuDevice):  # a camera with no controls
        output_dtype = np.uint8

    device = LightonDevice(LightonProfile(**KEYS), opu_device=SimulatedOpuDevice())
    with device:
        with pytest.raises(DeviceUnavailable, match="dark frames need the laser off.*no laser switch"):
            device.raw_frames("dark", 2)
        with pytest.raises(DeviceUnavailable, match="anchor frames need the reference beam alone"):
            device.raw_frames("anchor", 2)


def test_raw_frames_are_dn_at_the_exposure_the_sdk_reports(camera):
    with LightonDevice(LightonProfile(**KEYS)) as device:
        dark = device.raw_frames("dark", 20, exposure_us=1_000_000.0)
        anchor = device.raw_frames("anchor", 20, exposure_us=400.0)
        assert device.opu.device.laser_on and device.opu.device.reference_power_uw == 0.0  # restored
    assert dark.exposure_us == 1_000_000.0 and dark.max_dn == 255 and dark.dn.dtype == torch.int64
    assert float(dark.dn.double().mean()) == pytest.approx(10 + 60.0 / 6.0, abs=0.5)
    expected = 10 + (electrons(0.6, 400.0) + 60.0 * 4e-4) / 6.0
    assert float(anchor.dn.double().mean()) == pytest.approx(expected, rel=0.03)
    assert anchor.photons_per_pixel == pytest.approx(electrons(0.6, 400.0) / 0.5)


def test_report_is_interpolated_conservatively_and_independent_of_listing_order(calibrated):
    """Two calibrated temperatures (the measured point and a warmer copy with a larger dark floor):
    between them the bound is never above either neighbour's, and listing order changes nothing."""
    _, _, cal = calibrated
    cold = cal.operating_points[0]
    hot = cold.model_copy(
        update={
            "temperature_c": 80.0,
            "dark_e_min_pixel_lower": cold.dark_e_min_pixel_lower + 40.0,
            "dark_e": cold.dark_e.model_copy(update={"value": cold.dark_e.value + 50.0}),
        }
    )
    profile = LightonProfile(**KEYS)
    orders = [
        cal.model_copy(update={"temperatures_c": temps, "operating_points": points, "temperature_law": None})
        for temps, points in (([30.0, 80.0], [cold, hot]), ([80.0, 30.0], [hot, cold]))
    ]
    one, two = (load_calibrated_noise(c, profile) for c in orders)
    for t in (30.0, 55.0, 80.0):
        assert one.report(t) == two.report(t)
    low, mid, high = (one.report(t) for t in (30.0, 55.0, 80.0))
    assert mid.std_lower <= min(low.std_lower, high.std_lower)
    assert low.std < mid.std < high.std
    with pytest.raises(CalibrationError, match="outside the calibrated range"):
        one.report(85.0)


def test_frames_recorded_through_lightonml_calibrate_attach_and_plan_through_the_profiles_key(camera, tmp_path, capsys):
    """Record uint8 frames through the SDK -> `calibrate --frames-dir` -> key 'calibration' -> info and plan."""
    recorder = toml(tmp_path / "recorder.toml")  # the SDK's seam with the fake camera: what lightonml records
    export_frames(
        opu_hal.load_device(recorder), tmp_path / "frames", (30.0,), (400.0,), (1e5, 1e6), frames=4, levels=50
    )
    frame = np.load(tmp_path / "frames" / "anchor_30C_400us" / "0000.npy")
    assert frame.dtype == np.uint8 and frame.shape == (KEYS["out_features"],)
    cal = tmp_path / "cal.json"
    assert opu_main(["calibrate", str(recorder), "--frames-dir", str(tmp_path / "frames"), "--out", str(cal)]) == 0
    recorded = read_calibration(cal)
    assert recorded.adc_bits == 8
    assert recorded.gain_e_per_dn.lower <= TRUTH["gain_e_per_dn"] <= recorded.gain_e_per_dn.upper
    recorder.write_text(recorder.read_text() + 'calibration = "cal.json"\n')
    capsys.readouterr()
    assert opu_main(["info", str(recorder), "--json"]) == 0
    noise = json.loads(capsys.readouterr().out)["noise"]
    assert noise["source"] == "calibrated" and noise["calibration"] == str(cal.resolve())
    # The OPU itself (simulated = false, the same keys otherwise): the frames tied to it plan its digitized noise.
    real = toml(tmp_path / "opu.toml", simulated=False)
    assert (
        opu_main(
            ["calibrate", str(real), "--frames-dir", str(tmp_path / "frames"), "--out", str(tmp_path / "opu.json")]
        )
        == 0
    )
    real.write_text(real.read_text() + 'calibration = "opu.json"\n')
    plan = ["--sampling", "fixed", "--dataset-size", "1000", "--batch-size", "100", "--steps", "10"]
    plan += ["--target-epsilon", "8", "--dimension", "1000", "--lattice-resolution", "4", "--json"]
    capsys.readouterr()
    assert opu_main(["plan", "--profile", str(real), "--mechanism", "digitized", *plan]) == 0
    assert json.loads(capsys.readouterr().out)["reads_per_count"] >= 1
