"""Profile validation: every bad profile raises ProfileError naming file, key and what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

import opu_hal
from opu_hal import ProfileError, TorchProfile
from opu_hal.cli import main

GOOD = 'backend = "torch"\nin_features = 10\nout_features = 64\nnoise_std = 0.1\n'


def write(tmp_path: Path, text: str, name: str = "p.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_good_profile_becomes_the_backend_model(tmp_path):
    profile = opu_hal.load_profile(write(tmp_path, GOOD))
    assert isinstance(profile, TorchProfile)
    assert profile.noise_std == 0.1 and profile.device == "auto" and profile.label == "p"


def test_validated_profile_object_is_accepted_by_load_device():
    profile = TorchProfile(backend="torch", in_features=3, out_features=5, device="cpu")
    device = opu_hal.load_device(profile)
    assert device.profile is profile and device.out_features == 5


def test_profile_name_is_found_in_device_profiles():
    assert opu_hal.load_profile("torch-cpu").source.name == "torch-cpu.toml"


@pytest.mark.parametrize(
    "text, key, allowed",
    [
        pytest.param(GOOD + "colour = 1\n", "colour", "allowed keys: backend", id="unknown-key"),
        pytest.param('backend = "torch"\nout_features = 4\n', "in_features", "integer >= 1", id="missing-key"),
        pytest.param(GOOD.replace("64", '"64"'), "out_features", "integer >= 1", id="wrong-type"),
        pytest.param(GOOD.replace("0.1", "-0.5"), "noise_std", ">= 0.0", id="out-of-range"),
        pytest.param(GOOD.replace("0.1", "nan"), "noise_std", "finite", id="nan"),
        pytest.param(GOOD + 'device = "gpu"\n', "device", "'auto', 'cuda', 'cpu'", id="bad-choice"),
        pytest.param(GOOD.replace("torch", "quantum"), "backend", "'torch'", id="unknown-backend"),
        pytest.param("in_features = 3\n", "backend", "'torch'", id="missing-backend"),
    ],
)
def test_bad_profile_error_names_file_key_and_allowed_values(tmp_path, text, key, allowed):
    path = write(tmp_path, text)
    with pytest.raises(ProfileError) as info:
        opu_hal.load_profile(path)
    message = str(info.value)
    assert str(path) in message and f"'{key}'" in message and allowed in message


def test_malformed_toml_is_a_profile_error_with_the_line(tmp_path):
    path = write(tmp_path, 'backend = "torch\n')
    with pytest.raises(ProfileError, match=r"malformed TOML.*line 1"):
        opu_hal.load_profile(path)


def test_missing_file_is_a_profile_error_listing_known_profiles(tmp_path):
    with pytest.raises(ProfileError, match="no such profile file.*torch-cpu"):
        opu_hal.load_profile(tmp_path / "absent.toml")


def test_every_problem_is_reported_at_once(tmp_path):
    path = write(tmp_path, 'backend = "torch"\nin_features = 0\nout_features = 0\n')
    with pytest.raises(ProfileError, match=r"2 problem\(s\)"):
        opu_hal.load_profile(path)


def test_cli_prints_profile_error_and_exits_2_without_traceback(tmp_path, capsys):
    path = write(tmp_path, GOOD.replace("0.1", "-1.0"))
    assert main(["info", str(path)]) == 2
    err = capsys.readouterr().err
    assert "noise_std" in err and str(path) in err and "Traceback" not in err


def test_schema_1_and_a_missing_schema_are_read(tmp_path):
    assert opu_hal.load_profile(write(tmp_path, "schema = 1\n" + GOOD)).noise_std == 0.1
    assert opu_hal.load_profile(write(tmp_path, GOOD, "old.toml")).noise_std == 0.1


@pytest.mark.parametrize("value", ["2", '"1"', "true"])
def test_unknown_schema_is_a_profile_error_naming_file_and_key(tmp_path, value):
    path = write(tmp_path, f"schema = {value}\n" + GOOD)
    with pytest.raises(ProfileError, match=rf"{path}: key 'schema' is .*reads profile schema 1"):
        opu_hal.load_profile(path)


def test_the_profiles_are_committed_once():
    """The wheel ships opu_hal/device_profiles; the repository's device_profiles/ is a link to it."""
    root = Path(__file__).resolve().parent.parent
    assert (root / "device_profiles").is_symlink()
    assert (root / "device_profiles").resolve() == (root / "opu_hal" / "device_profiles").resolve()
    assert sorted(p.name for p in (root / "device_profiles").glob("*.toml"))


def test_default_profiles_are_found_by_name_outside_the_repository(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert opu_hal.load_profile("opu-sim").source.parent.name == "device_profiles"
    assert opu_hal.load_profile("opu-sim").source.parent.parent.name == "opu_hal"
