"""The LightOn backend through the real lightonml SDK (its simulated device), faults included.

Faults are injected through the SDK's own ``opu_device`` seam. lightonml accepts only objects
whose class is named ``SimulatedOpuDevice`` or ``OpuDevice``, so the faulty devices below are
subclasses of the SDK's simulated device under that name.
"""

from __future__ import annotations

import math
import sys
import threading

import numpy as np
import pytest
import torch
from lightonml.internal import simulated_device

import opu_hal
from opu_hal import DeviceTimeout, DeviceUnavailable, LightonProfile, ProfileError
from opu_hal.backends import lighton
from opu_hal.backends.lighton import LightonDevice
from opu_hal.backends.lighton_calls import call_with_retries
from opu_hal.cli import main


def profile(**overrides) -> LightonProfile:
    fields = dict(
        backend="lighton", in_features=12, out_features=64, simulated=True, retries=2, timeout_s=2.0, backoff_s=0.0
    )
    return LightonProfile(**{**fields, **overrides})


def faulty(failures: int | None = None, hang: threading.Event | None = None):
    """A simulated SDK device failing ``failures`` times (None: always), or hanging on ``hang``."""

    class SimulatedOpuDevice(simulated_device.SimulatedOpuDevice):
        calls = 0

        def transform2(self, X, Y, _=None):
            type(self).calls += 1
            if hang is not None:
                hang.wait()
            if failures is None or type(self).calls <= failures:
                raise RuntimeError("camera frame lost")
            return super().transform2(X, Y, _)

    return SimulatedOpuDevice(linear=True)


BATCH = (torch.rand(6, 12, generator=torch.Generator().manual_seed(0)) < 0.5).float()


def test_simulated_sdk_projection_is_x_times_the_real_part_of_its_matrix():
    with LightonDevice(profile()) as device:
        values = device.project(BATCH).values
        matrix = device.opu.device.random_matrix
    np.testing.assert_allclose(values.numpy(), BATCH.numpy() @ matrix.real, rtol=1e-5, atol=1e-5)


def test_profile_seed_selects_the_sdk_matrix():
    with LightonDevice(profile(seed=1)) as one, LightonDevice(profile(seed=2)) as two:
        assert not torch.equal(one.project(BATCH).values, two.project(BATCH).values)


def test_simulated_noise_is_software_noise_with_an_exact_report():
    with LightonDevice(profile(noise_std=0.2, out_features=4096)) as device:
        noisy = device.project(BATCH[:1]).values
        clean = torch.from_numpy(BATCH[:1].numpy() @ device.opu.device.random_matrix.real)
        assert device.project(BATCH[:1]).noise == opu_hal.NoiseReport(0.2, 0.2, "software")
    assert (noisy - clean).std().item() == pytest.approx(0.2, rel=0.05)


def test_intensity_mode_returns_squared_modulus():
    with LightonDevice(profile(mode="intensity")) as device:
        values = device.project(BATCH).values
        matrix = device.opu.device.random_matrix
    np.testing.assert_allclose(values.numpy(), np.abs(BATCH.numpy() @ matrix) ** 2, rtol=1e-4, atol=1e-5)


def test_transient_failures_are_retried_and_the_whole_batch_returned():
    device = LightonDevice(profile(retries=3), opu_device=faulty(failures=2))
    with device:
        projection = device.project(BATCH)
    assert projection.values.shape == (6, 64) and device.attempts == 3


def test_failing_forever_raises_device_unavailable_after_bounded_retries():
    device = LightonDevice(profile(retries=2), opu_device=faulty(failures=None))
    with device, pytest.raises(DeviceUnavailable, match="failed 3 time"):
        device.project(BATCH)
    assert device.attempts == 3


def sdk_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "opu-hal sdk call" and t.is_alive()]


def test_hung_transform_times_out_without_a_second_concurrent_sdk_call_or_thread_leak():
    release = threading.Event()
    sdk = faulty(hang=release)
    device = LightonDevice(profile(retries=2, timeout_s=0.2), opu_device=sdk).open()
    with pytest.raises(DeviceTimeout, match="timed out 3 time.*still inside the SDK"):
        device.project(BATCH)
    assert type(sdk).calls == 1 and len(sdk_threads()) == 1  # retries waited, never called again
    release.set()
    for thread in sdk_threads():
        thread.join(2.0)
    device.close()
    assert sdk_threads() == [] and device.closed


def test_closing_while_a_call_is_stuck_is_a_timeout_and_the_device_is_closed():
    release = threading.Event()
    sdk = faulty(hang=release)
    device = LightonDevice(profile(retries=0, timeout_s=0.2), opu_device=sdk).open()
    try:
        with pytest.raises(DeviceTimeout):
            device.project(BATCH)
        with pytest.raises(DeviceTimeout, match="closing the OPU"):
            device.close()
        assert device.closed and sdk.active  # close() was never sent into the busy SDK
        device.close()  # a second close is a no-op
        with pytest.raises(DeviceUnavailable, match="closed"):
            device.project(BATCH)
    finally:
        release.set()


def process_running() -> BaseException:
    from lightonml.internal.pidfile import ProcessRunningException

    return ProcessRunningException("process already running in /tmp/opu.pid as pid 4242")


def opening(failures: int | None, error=process_running, hang: threading.Event | None = None):
    """A simulated SDK device whose ``open`` fails ``failures`` times (None: always) or hangs."""

    class SimulatedOpuDevice(simulated_device.SimulatedOpuDevice):
        opens = 0

        def open(self):
            type(self).opens += 1
            if hang is not None:
                hang.wait()
            if failures is None or type(self).opens <= failures:
                raise error()
            super().open()

    return SimulatedOpuDevice(linear=True)


def test_opu_held_by_another_process_is_device_busy_after_retries():
    sdk = opening(failures=None)
    device = LightonDevice(profile(retries=2), opu_device=sdk)
    with pytest.raises(opu_hal.DeviceBusy, match="in use by another process.*pid 4242"):
        device.open()
    assert type(sdk).opens == 3 and isinstance(opu_hal.DeviceBusy("x"), opu_hal.OpuHalError)


def test_opu_busy_at_first_then_free_opens_through_retries():
    device = LightonDevice(profile(retries=2), opu_device=opening(failures=2))
    with device:
        assert device.project(BATCH).values.shape == (6, 64)


def test_hung_open_times_out_and_leaves_the_device_unopened():
    release = threading.Event()
    device = LightonDevice(profile(retries=1, timeout_s=0.2), opu_device=opening(failures=0, hang=release))
    try:
        with pytest.raises(DeviceTimeout, match="opening the OPU"):
            device.open()
        assert device.opu is None
    finally:
        release.set()


@pytest.mark.parametrize("row", [np.nan, np.inf, 0.0], ids=["nan", "inf", "zeros"])
def test_invalid_rows_from_the_sdk_are_a_failure_not_success(row):
    device = LightonDevice(profile(retries=1))
    with device:

        def bad(batch):
            out = np.ones((batch.shape[0], 64))
            out[1] = row
            return out

        device.opu.linear_transform = bad
        with pytest.raises(DeviceUnavailable, match="output row"):
            device.project(BATCH)
        assert device.attempts == 2


def test_all_zero_output_for_an_all_zero_input_row_is_valid():
    batch = BATCH.clone()
    batch[2] = 0
    with LightonDevice(profile()) as device:
        values = device.project(batch).values
    assert not values[2].any() and values[0].any()


def test_host_memory_error_is_not_retried_nor_an_opu_failure():
    device = LightonDevice(profile(retries=3))
    with device:

        def out_of_memory(batch):
            raise MemoryError("cannot allocate 16 GiB")

        device.opu.linear_transform = out_of_memory
        with pytest.raises(opu_hal.HostMemoryError, match="host ran out of memory.*not an OPU failure"):
            device.project(BATCH)
    assert device.attempts == 1


def test_failing_close_is_typed_and_the_device_is_closed_once():
    device = LightonDevice(profile()).open()
    calls = []

    def broken_close():
        calls.append(1)
        raise RuntimeError("USB reset")

    device.opu.close = broken_close
    with pytest.raises(DeviceUnavailable, match="closing the OPU failed.*USB reset"):
        device.close()
    device.close()
    assert device.closed and calls == [1]


def test_backoff_doubles_and_no_partial_result_escapes():
    delays: list[float] = []
    outputs = iter([RuntimeError("lost"), RuntimeError("lost"), np.ones((6, 64))])

    def call():
        item = next(outputs)
        if isinstance(item, Exception):
            raise item
        return item

    result = call_with_retries(call, retries=3, timeout_s=1.0, backoff_s=0.5, sleep=delays.append)
    assert delays == [0.5, 1.0] and result.shape == (6, 64)


def test_partial_batch_from_the_sdk_counts_as_a_failure():
    device = LightonDevice(profile(retries=1))
    with device:
        device.opu.linear_transform = lambda batch: np.zeros((batch.shape[0] - 1, 64))
        with pytest.raises(DeviceUnavailable, match="expected"):
            device.project(BATCH)


def test_missing_sdk_is_device_unavailable_with_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "lightonml", None)
    with pytest.raises(DeviceUnavailable, match="pip install --no-deps lightonml==1.4.3"):
        opu_hal.load_device(profile())


def test_hardware_profile_without_opu_configuration_is_device_unavailable(monkeypatch):
    monkeypatch.setattr(lighton, "LIGHTON_CONFIG_GLOB", "/nonexistent/lighton/*.json")
    with pytest.raises(DeviceUnavailable, match="no OPU on this host"):
        opu_hal.load_device(profile(simulated=False))


def test_cli_info_on_the_cloud_profile_explains_and_exits_2(capsys):
    assert main(["info", "lighton-cloud"]) == 2
    err = capsys.readouterr().err
    assert "no OPU on this host" in err and "Traceback" not in err


def test_uncalibrated_hardware_reports_zero_noise_and_calibration_file_is_used(tmp_path, monkeypatch):
    from opu_hal.calibration.run import calibrate_device, physics_of
    from opu_hal.calibration.schema import write_calibration
    from opu_hal.contract.errors import CalibrationError

    monkeypatch.setattr(lighton, "check_hardware_present", lambda: None)
    device = LightonDevice(profile(simulated=False))
    assert not device.calibrated and device.noise_report().std == 0.0
    twin = opu_hal.load_device(
        opu_hal.validate_profile(
            {
                "backend": "simulated",
                "in_features": 12,
                "out_features": 64,
                "adc_bits": 12,
                "gain_e_per_dn": 3.0,
                "black_level_dn": 100,
                "read_noise_e": 8.0,
                "exposure_us": 400.0,
            }
        )
    )
    measured = calibrate_device(twin, [31.0], [400.0], [100_000.0], frames=8, bootstrap=50)
    (tmp_path / "opu.toml").write_text(  # the declared temperature (lightonml cannot read it), a reference beam
        'backend = "lighton"\nin_features = 12\nout_features = 64\nexposure_us = 400.0\ncalibration = "cal.json"\n'
        "temperature_c = 31.0\nanchor_power_uw = 0.7\n"
    )
    identity = measured.device.model_copy(
        update={  # as if measured on this OPU: its identity, its physics keys
            "backend": "lighton",
            "profile": "opu",
            "physics": physics_of(opu_hal.load_profile(tmp_path / "opu.toml")),
        }
    )
    write_calibration(measured.model_copy(update={"device": identity}), tmp_path / "cal.json")
    calibrated = opu_hal.load_device(tmp_path / "opu.toml")  # the profile's calibration key
    assert isinstance(calibrated, LightonDevice) and calibrated.calibration is not None
    report = calibrated.noise_report()
    assert report.source == "calibrated" and report.temperature_c == 31.0 and 0 < report.std_lower <= report.std
    (tmp_path / "undeclared.toml").write_text((tmp_path / "opu.toml").read_text().replace("temperature_c = 31.0\n", ""))
    with pytest.raises(CalibrationError, match="needs the keys 'temperature_c'"):
        opu_hal.load_device(tmp_path / "undeclared.toml")
    (tmp_path / "other.toml").write_text((tmp_path / "opu.toml").read_text().replace("64", "32"))
    with pytest.raises(CalibrationError, match="key 'device.out_features' is 64"):
        opu_hal.load_device(tmp_path / "other.toml")


def test_software_noise_on_hardware_and_credentials_in_profiles_are_refused():
    with pytest.raises(ProfileError, match="noise_std is software noise"):
        opu_hal.validate_profile({"backend": "lighton", "in_features": 4, "out_features": 4, "noise_std": 0.1})
    with pytest.raises(ProfileError, match="unknown key"):
        opu_hal.validate_profile(
            {"backend": "lighton", "in_features": 4, "out_features": 4, "simulated": True, "api_token": "secret"}
        )


def test_sdk_simulated_device_sets_its_software_noise_through_set_options():
    with opu_hal.load_device(profile(noise_std=0.1)) as device:
        assert device.capabilities.settable["noise_std"][:2] == (0.0, math.inf)
        device.set_options(noise_std=0.0)
        first, second = device.project(BATCH), device.project(BATCH)
    assert first.noise.std == 0.0
    assert torch.equal(first.values, second.values)
