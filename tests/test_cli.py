"""The device commands of the ``opu-hal`` CLI."""

import json

from opu_hal.cli import main


def test_devices_lists_every_profile_with_backend_and_size(capsys):
    assert main(["devices"]) == 0
    out = capsys.readouterr().out
    assert "torch-cpu" in out and "torch" in out and "10->1024" in out


def test_info_prints_profile_capabilities_and_noise_as_json(capsys):
    assert main(["info", "torch-cpu", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["profile"]["backend"] == "torch"
    assert info["capabilities"]["output_kind"] == "linear"
    assert info["noise"]["std"] == info["profile"]["noise_std"]


def test_project_prints_shape_and_noise_report(capsys):
    assert main(["project", "torch-cpu", "--batch", "3", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["values_shape"] == [3, 1024]
    assert result["noise"]["source"] == "software"


def test_unknown_profile_name_exits_2(capsys):
    assert main(["info", "no-such-profile"]) == 2
    assert "no such profile file" in capsys.readouterr().err
