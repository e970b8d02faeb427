"""One convention for every ``opu-hal`` command, checked by walking the parser: help text on every
option, no RST markup, ``--json`` wherever a command prints data, ``--out`` for data files and
``--plot`` for pictures, per-method option groups in ``train``, and a parser that loads nothing heavy."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from opu_hal.cli import SAMPLINGS, build_parser, main
from trainers.cli import register_train_commands

ROOT = Path(__file__).resolve().parent.parent
#: Commands whose output is data: each must offer --json.
DATA_COMMANDS = {"devices", "info", "noise", "project", "check", "account", "plan", "table"}


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser([register_train_commands])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _options(parser: argparse.ArgumentParser):
    return [a for a in parser._actions if not isinstance(a, (argparse._HelpAction, argparse._VersionAction))]


@pytest.mark.parametrize("command", sorted(_commands()))
def test_every_option_has_help_without_rst_markup(command):
    parser = _commands()[command]
    for action in _options(parser):
        name = "/".join(action.option_strings) or action.dest
        assert action.help and action.help.strip(), f"{command} {name}: no help text"
        assert "``" not in action.help and ":func:" not in action.help, f"{command} {name}: RST markup in help"
    text = parser.format_help()
    assert "``" not in text and "{per_method}" not in text and "{methods}" not in text


def test_commands_that_print_data_offer_json():
    commands = _commands()
    missing = [c for c in DATA_COMMANDS if "--json" not in commands[c]._option_string_actions]
    assert not missing, missing


@pytest.mark.parametrize("command", sorted(_commands()))
def test_out_names_a_data_file_and_plot_a_picture(command):
    parser = _commands()[command]
    for option, action in parser._option_string_actions.items():
        if option == "--plot":
            assert any(word in action.help for word in ("PNG", "picture")), f"{command} --plot: {action.help}"
        if option == "--out" and "deprecated" not in action.help:
            assert "PNG" not in action.help and "picture" not in action.help, f"{command} --out is a picture"


def test_train_help_groups_options_by_method_and_shows_per_method_defaults():
    train = _commands()["train"]
    groups = {g.title: [a.option_strings[0] for a in g._group_actions] for g in train._action_groups}
    privacy = next(t for t in groups if t.startswith("privacy"))
    assert "dp-ulr" in privacy and "dp-mac" in privacy
    assert "--profile" in groups["device"] and "--profile" not in groups[privacy]
    assert {"dp-sgd", "dp-dfa", "photonic-dp", "dp-ulr and dp-mac"} <= set(groups)
    text = " ".join(train.format_help().split())
    assert "default per method: 256 (" in text and "128 (" in text  # --batch-size differs by method


def test_sigma_alias_warns_and_sets_the_software_noise_std(capsys):
    args = _commands()["train"].parse_args(["--method", "photonic-dp", "--sigma", "0.05"])
    assert args.software_noise_std == 0.05
    assert "--sigma is deprecated" in capsys.readouterr().err


def test_an_unknown_method_is_an_invalid_choice(capsys):
    with pytest.raises(SystemExit):
        _commands()["train"].parse_args(["--method", "no-such"])
    assert "invalid choice: 'no-such'" in capsys.readouterr().err


def test_sampling_choices_match_the_accountant():
    from opu_hal.privacy.run_shape import SAMPLINGS as ACCOUNTED

    assert tuple(SAMPLINGS) == tuple(ACCOUNTED)


def test_building_the_parser_loads_neither_torch_nor_the_accountant():
    code = ("import sys; from opu_hal.cli import build_parser; from trainers.cli import register_train_commands; "
            "build_parser([register_train_commands]); "
            "print(sorted(m for m in ('torch', 'dp_accounting', 'scipy', 'matplotlib', 'pydantic') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.startswith("opu-hal ")


def test_devices_lists_only_files_that_look_like_profiles(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (tmp_path / "broken.toml").write_text("backend = \n")
    (tmp_path / "mine.toml").write_text('backend = "torch"\nin_features = 4\nout_features = 8\n')
    assert main(["devices", "--dir", str(tmp_path), "--json"]) == 0
    rows = {r["profile"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows) == {"broken", "mine"} and rows["mine"]["valid"] and not rows["broken"]["valid"]


def test_table_json_has_the_markdown_columns(tmp_path, capsys):
    record = {"method": "bp", "hyperparameters": {}, "final": {"test_accuracy": 0.5, "epochs_completed": 1,
                                                                "wall_time_s": 2.0}}
    (tmp_path / "r.json").write_text(json.dumps(record))
    from trainers.cli import main as trainers_main

    assert trainers_main(["table", str(tmp_path / "r.json"), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["method"] == "bp" and row["test acc (%)"] == "50.00"
