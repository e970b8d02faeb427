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


def _install_commands(tmp_path, monkeypatch, entries: dict[str, str], module_source: str = "") -> None:
    """A real installed distribution (dist-info on sys.path) declaring opu_hal.commands entry points."""
    import sys

    (tmp_path / "cmd_plugin.py").write_text(module_source)
    dist = tmp_path / "fake_cmd_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-cmd-plugin\nVersion: 0.1\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entries.items())
    (dist / "entry_points.txt").write_text(f"[opu_hal.commands]\n{lines}")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "cmd_plugin", raising=False)


HELLO = """
def register(sub):
    p = sub.add_parser("hello")
    p.set_defaults(func=lambda args: print("hello from a plugin") or 0)
"""


def test_installed_packages_register_commands_into_opu_hal(tmp_path, monkeypatch, capsys):
    _install_commands(tmp_path, monkeypatch, {"hello": "cmd_plugin:register"}, HELLO)
    assert main(["hello"]) == 0
    assert capsys.readouterr().out.strip() == "hello from a plugin"


def test_trainers_commands_registered_both_ways_appear_once(tmp_path, monkeypatch):
    from trainers import cli as trainers_cli

    _install_commands(tmp_path, monkeypatch, {"trainers": "trainers.cli:register_train_commands"})
    parser = trainers_cli.hal_cli.build_parser([trainers_cli.register_train_commands])
    assert parser.parse_args(["train", "--method", "bp"]).method == "bp"


def test_broken_command_entry_point_warns_and_leaves_the_device_commands(tmp_path, monkeypatch, capsys):
    import pytest

    _install_commands(tmp_path, monkeypatch, {"broken": "cmd_plugin:missing"}, HELLO)
    with pytest.warns(UserWarning, match="broken.*failed to load"):
        assert main(["devices"]) == 0
