"""The plugin kit: a plugin installed by entry points (a backend with SECRET noise and the named
profiles it ships) passes ``opu-hal check``; one whose matrix is not the profile's fails it."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from opu_hal.cli import main
from opu_hal.profiles import registry

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "secret_noise_plugin"


@pytest.fixture
def installed_plugin(tmp_path, monkeypatch):
    """The example plugin as a real installed distribution (dist-info with entry points on sys.path)."""
    shutil.copytree(EXAMPLE, tmp_path / "plugin")
    dist = tmp_path / "plugin" / "secret_noise_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: secret-noise-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[opu_hal.backends]\nsecret-noise = secret_noise_backend:SPEC\n"
        "[opu_hal.profiles]\nsecret-noise = secret_noise_backend:PROFILES\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "plugin"))
    monkeypatch.delitem(sys.modules, "secret_noise_backend", raising=False)
    registry.refresh_entry_points()
    yield tmp_path / "plugin"
    registry.refresh_entry_points()


def test_a_plugin_with_secret_noise_passes_check_by_its_shipped_profile_name(installed_plugin, capsys):
    assert main(["check", "secret-noise-cpu", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["passed"] and result["checks"]["same_profile_same_projections"]["status"] == "passed"


def test_secret_noise_really_differs_between_two_devices_of_one_profile(installed_plugin):
    import torch

    from opu_hal import load_device

    a, b = load_device("secret-noise-cpu"), load_device("secret-noise-cpu")
    x = torch.ones(1, a.in_features)
    assert not torch.equal(a.project(x).values, b.project(x).values)


def test_check_fails_a_plugin_whose_matrix_is_not_drawn_from_the_profile(installed_plugin, capsys):
    source = installed_plugin / "secret_noise_backend.py"
    source.write_text(
        source.read_text().replace(
            "torch.Generator().manual_seed(profile.seed)",
            "torch.Generator().manual_seed(__import__('os').getpid() + id(self))",
        )
    )
    assert main(["check", "secret-noise-cpu", "--only", "same_profile_same_projections"]) == 1
    out = capsys.readouterr().out
    assert "failed" in out and "disagree beyond their noise" in out


def test_check_names_an_unknown_check(installed_plugin, capsys):
    assert main(["check", "secret-noise-cpu", "--only", "no_such_check"]) == 2
    assert "unknown check(s) no_such_check" in capsys.readouterr().err
