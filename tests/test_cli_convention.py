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
DATA_COMMANDS = {
    "devices",
    "info",
    "noise",
    "project",
    "check",
    "account",
    "plan",
    "table",
    "train",
    "tune",
    "audit",
    "calibrate",
}


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
    assert "default per method: 256 (" in text and "1024 (dp-dfa, dp-sgd)" in text  # --batch-size differs by method


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
    code = (
        "import sys; from opu_hal.cli import build_parser; from trainers.cli import register_train_commands; "
        "build_parser([register_train_commands]); "
        "print(sorted(m for m in ('torch', 'dp_accounting', 'scipy', 'matplotlib', 'pydantic') if m in sys.modules))"
    )
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
    record = {
        "method": "bp",
        "hyperparameters": {},
        "final": {"test_accuracy": 0.5, "epochs_completed": 1, "wall_time_s": 2.0},
    }
    (tmp_path / "r.json").write_text(json.dumps(record))
    from trainers.cli import main as trainers_main

    assert trainers_main(["table", str(tmp_path / "r.json"), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["method"] == "bp" and row["test acc (%)"] == "50.00"


# -- issue 50: --json, --quiet, output folders, unknown options, profile names, a closed pipe -----
#: A profile whose calibration takes a second (one temperature, 64 pixels, 4 frames per series).
POINT_PROFILE = (
    'backend = "simulated"\nin_features = 4\nout_features = 64\ngain_e_per_dn = 1.0\n'
    "adc_bits = 12\nanchor_power_uw = 2.0\ntemperature_min_c = 25.0\ntemperature_max_c = 25.0\n"
)
TORCH_PROFILE = 'backend = "torch"\nin_features = 4\nout_features = 8\n'
#: The smallest run of each training command (the digits shipped with scikit-learn).
SMALL_RUN = [
    "--dataset",
    "digits",
    "--train-limit",
    "100",
    "--batch-size",
    "100",
    "--epochs",
    "1",
    "--hidden",
    "16",
    "--quiet",
]
JSON_RUNS = {
    "train": ["train", "--method", "bp", *SMALL_RUN],
    "tune": [
        "tune",
        "--method",
        "dp-sgd",
        *SMALL_RUN,
        "--target-epsilon",
        "1",
        "--space",
        "lr=0.1,0.2",
        "--mean-runs",
        "1",
        "--k-distribution",
        "poisson",
    ],
    "audit": [
        "audit",
        "--method",
        "dp-sgd",
        *SMALL_RUN,
        "--noise-multiplier",
        "5",
        "--threat-model",
        "black-box",
        "--canaries",
        "10",
    ],
}


def _calibrate(tmp_path: Path, *extra: str) -> list[str]:
    (tmp_path / "point.toml").write_text(POINT_PROFILE)
    return ["calibrate", str(tmp_path / "point.toml"), "--frames", "4", "--out", str(tmp_path / "c.json"), *extra]


@pytest.mark.parametrize("command", sorted(JSON_RUNS))
def test_json_prints_one_document_and_nothing_else_on_stdout(command, capsys):
    assert main([*JSON_RUNS[command], "--json"]) == 0
    out = capsys.readouterr().out
    document = json.loads(out)  # the whole of stdout: one JSON document
    assert document["method" if command != "tune" else "final_run"]


def test_calibrate_json_prints_the_summary_and_the_files_written(tmp_path, capsys):
    assert main(_calibrate(tmp_path, "--json")) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["calibration"] == str(tmp_path / "c.json") and document["plot"] == str(tmp_path / "c.png")
    assert document["summary"]["temperatures_c"] == [25.0] and document["summary"]["gain_e_per_dn"]["value"] > 0


def test_calibrate_quiet_prints_nothing(tmp_path, capsys):
    assert main(_calibrate(tmp_path, "--quiet")) == 0
    printed = capsys.readouterr()
    assert printed.out == "" and printed.err == ""
    assert (tmp_path / "c.json").is_file()


#: One valid command line per command that takes --out, the --out path left to fill.
OUT_COMMANDS = {
    "train": ["train", "--method", "bp", *SMALL_RUN],
    "tune": JSON_RUNS["tune"],
    "audit": JSON_RUNS["audit"],
    "calibrate": ["calibrate", "opu-sim", "--frames", "4"],
    "plot": ["plot", "r.json"],
}


def test_every_command_with_out_is_checked_for_a_missing_folder():
    assert {c for c, p in _commands().items() if "--out" in p._option_string_actions} == set(OUT_COMMANDS)


@pytest.mark.parametrize("command", sorted(OUT_COMMANDS))
def test_out_into_a_missing_folder_is_refused_before_any_work(command, tmp_path, capsys):
    folder = tmp_path / "missing" / "runs"
    assert main([*OUT_COMMANDS[command], "--out", str(folder / "r.json")]) == 2
    err = capsys.readouterr().err
    assert f"--out {folder / 'r.json'}: the folder {folder} does not exist" in err and f"mkdir -p {folder}" in err
    assert not (tmp_path / "missing").exists()


def test_plot_into_a_missing_folder_is_refused(tmp_path, capsys):
    folder = tmp_path / "missing"
    assert main(["plot", "r.json", "--plot", str(folder / "p.png")]) == 2
    assert f"the folder {folder} does not exist" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["devices", "--jsn"],
        ["train", "--method", "bp", "--epocs", "1"],
        ["calibrate", "opu-sim", "--out", "c.json", "--frame-count", "4"],
    ],
    ids=["devices", "train", "calibrate"],
)
def test_an_unknown_option_shows_the_commands_usage(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # were the option taken, nothing lands in the repository
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    unknown = " ".join(argv[argv.index(next(a for a in argv if a in ("--jsn", "--epocs", "--frame-count"))) :])
    assert exit_.value.code == 2
    assert err.startswith(f"usage: opu-hal {argv[0]} ")
    assert f"opu-hal {argv[0]}: error: unrecognized arguments: {unknown}" in err


def _local_profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A working folder whose ./device_profiles holds an opu-sim that is not the packaged one."""
    (tmp_path / "device_profiles").mkdir()
    for name in ("opu-sim", "only-here"):
        (tmp_path / "device_profiles" / f"{name}.toml").write_text(TORCH_PROFILE)
    monkeypatch.chdir(tmp_path)


def test_a_name_is_the_packaged_profile_with_a_note_when_the_working_folder_has_one(tmp_path, monkeypatch, capsys):
    _local_profiles(tmp_path, monkeypatch)
    assert main(["info", "opu-sim", "--json"]) == 0
    printed = capsys.readouterr()
    source = Path(json.loads(printed.out)["profile"]["source"])
    assert source == ROOT / "opu_hal" / "device_profiles" / "opu-sim.toml"
    (note,) = printed.err.splitlines()
    assert note.startswith("note: profile 'opu-sim' is ") and "device_profiles/opu-sim.toml is not used" in note


def test_a_local_profile_is_used_when_given_as_a_path(tmp_path, monkeypatch):
    from opu_hal.profiles.catalogue import load_profile

    _local_profiles(tmp_path, monkeypatch)
    assert load_profile("device_profiles/opu-sim.toml").backend == "torch"
    assert load_profile("./device_profiles/only-here.toml").backend == "torch"


def test_a_name_only_in_the_working_folder_is_refused_with_its_path(tmp_path, monkeypatch):
    from opu_hal.contract.errors import ProfileError
    from opu_hal.profiles.catalogue import load_profile

    _local_profiles(tmp_path, monkeypatch)
    with pytest.raises(ProfileError, match=r"device_profiles/only-here\.toml exists: give that path"):
        load_profile("only-here")


def test_profile_dir_variable_and_the_repository_link_still_resolve_names(tmp_path, monkeypatch, capsys):
    from opu_hal.profiles.catalogue import PROFILE_DIR_ENV, load_profile

    monkeypatch.chdir(ROOT)  # device_profiles/ here links to the packaged profiles: no note
    assert load_profile("opu-sim").source.resolve() == (ROOT / "device_profiles" / "opu-sim.toml").resolve()
    assert load_profile("device_profiles/opu-sim.toml").backend == "simulated"
    (tmp_path / "mine.toml").write_text(TORCH_PROFILE)
    monkeypatch.setenv(PROFILE_DIR_ENV, str(tmp_path))
    assert load_profile("mine").source == tmp_path / "mine.toml"
    assert capsys.readouterr().err == ""


class _ClosedPipe:
    """A stdout whose reader went away."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_closed_stdout_ends_the_command_with_the_sigpipe_status(monkeypatch):
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert main(["devices", "--json"]) == 141


def test_a_pipe_whose_reader_went_away_leaves_no_traceback():
    process = subprocess.Popen(
        [sys.executable, "-m", "opu_hal", "devices", "--json"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    process.stdout.close()  # like `| head` that has exited before the first write
    err = process.stderr.read()
    assert process.wait(timeout=120) in (0, 141)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
