"""A calibration file is checked for physical plausibility on load: electrons per read within the
camera's full well and ADC top, a positive anchor signal and saturation; a refusal names the key and
its range (``opu-hal plan`` used to plan on 1e9 e- per read, or fail in a math domain error)."""

from __future__ import annotations

import json

import pytest

import opu_hal
from opu_hal.cli import main

CAMERA = {
    "backend": "simulated",
    "in_features": 4,
    "out_features": 64,
    "seed": 3,
    "mode": "linear",
    "gain_e_per_dn": 1.0,
    "adc_bits": 12,
    "black_level_dn": 64,
    "anchor_power_uw": 2.0,
    "privacy_anchor": "reference-beam",  # the flat-anchor calibration path (speckle: test_speckle_anchor.py)
}
PLAN = ["plan", "--dataset-size", "54000", "--batch-size", "256", "--epochs", "5", "--target-epsilon", "8"]
SKELLAM = ["--mechanism", "skellam", "--dimension", "1000", "--lattice-resolution", "10", "--sampling", "fixed"]


@pytest.fixture(scope="module")
def camera(tmp_path_factory):
    from opu_hal.calibration.run import calibrate_device
    from opu_hal.calibration.schema import write_calibration

    folder = tmp_path_factory.mktemp("plausible")
    (folder / "cam.toml").write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in CAMERA.items()))
    with opu_hal.load_device(opu_hal.validate_profile(CAMERA)) as device:
        calibration = calibrate_device(device, [25.0, 40.0], [400.0], [100_000.0], frames=4, bootstrap=30)
    write_calibration(calibration, folder / "cal.json")
    return folder


def _every_point(data: dict, **values) -> None:
    for point in data["operating_points"]:
        point.update(values)


DAMAGES = {
    "1e9 e- per read": (
        lambda d: _every_point(d, anchor_read_e_min_pixel_lower=1e9, anchor_e_max_pixel_upper=1e9),
        "key 'operating_points.0.anchor_read_e_min_pixel_lower' must be in [0, ",
    ),
    "negative anchor e-": (
        lambda d: _every_point(d, anchor_e={**d["operating_points"][0]["anchor_e"], "lower": -6.0}),
        "key 'operating_points.0.anchor_e.lower' must be in (0, ",
    ),
    "saturation far above the ADC": (
        lambda d: d.update(saturation_e={**d["saturation_e"], "upper": 1e12}),
        "key 'saturation_e.upper' must be in [0, ",
    ),
    "negative saturation": (
        lambda d: d.update(saturation_e={**d["saturation_e"], "lower": -6.0}),
        "key 'saturation_e.lower' must be in (0, inf)",
    ),
}


@pytest.mark.parametrize("mechanism", [SKELLAM, ["--sensitivity", "1"]], ids=["skellam", "gaussian"])
@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_plan_refuses_a_physically_implausible_calibration_naming_the_key(damage, mechanism, camera, capsys):
    change, named = DAMAGES[damage]
    data = json.loads((camera / "cal.json").read_text())
    change(data)
    path = camera / f"{damage.replace(' ', '-')}.json"
    path.write_text(json.dumps(data))
    code = main([*PLAN, *mechanism, "--profile", str(camera / "cam.toml"), "--calibration", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and named in err and "physically plausible" in err and "Traceback" not in err


def test_a_calibration_as_measured_is_plausible(camera, capsys):
    argv = [
        *PLAN,
        "--sensitivity",
        "1",
        "--profile",
        str(camera / "cam.toml"),
        "--calibration",
        str(camera / "cal.json"),
    ]
    assert main(argv) in (0, 1)  # planned (1: no operating point reaches the target), not refused
    assert "Traceback" not in capsys.readouterr().err


def test_a_calibration_as_measured_is_refused_by_the_skellam_plan_for_unity_gain_not_plausibility(camera, capsys):
    """A photon-transfer gain interval (about 1 % wide) does not prove 1 e-/DN: the plan says so."""
    argv = [*PLAN, *SKELLAM, "--profile", str(camera / "cam.toml"), "--calibration", str(camera / "cal.json")]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "does not prove unity gain" in err and "physically plausible" not in err
