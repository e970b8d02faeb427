"""Issue 32 (reliability, round 3): hostile inputs give a clear error naming the file, key or
option and the allowed range (exit 2), or a correct result; never a traceback or a silent wrong one."""

from __future__ import annotations

import importlib.util
import resource
from pathlib import Path
from types import ModuleType

import pytest
import torch

from opu_hal.runtime import memory


def test_available_memory_honours_the_address_space_limit(monkeypatch):
    used = memory._status_bytes("VmSize") or 0
    monkeypatch.setattr(memory.resource, "getrlimit", lambda which: (used + 2**30, resource.RLIM_INFINITY))
    assert memory.address_space_headroom() <= 2**30
    assert memory.available_bytes() <= 2**30


def test_available_memory_honours_a_cgroup_v2_limit(tmp_path, monkeypatch):
    (tmp_path / "job").mkdir()
    (tmp_path / "job/memory.max").write_text(f"{3 * 2**30}\n")
    (tmp_path / "job/memory.current").write_text(f"{2**30}\n")
    membership = tmp_path / "cgroup"
    membership.write_text("0::/job\n")
    assert memory.cgroup_headroom(tmp_path, membership) == 2 * 2**30
    (tmp_path / "job/memory.max").write_text("max\n")
    assert memory.cgroup_headroom(tmp_path, membership) is None
    monkeypatch.setattr(memory, "cgroup_headroom", lambda: 12345)
    assert memory.available_bytes() == 12345


from trainers.cli import main  # noqa: E402  (opu-hal's parser with the trainers' commands)


def _fuzzer_surfaces() -> ModuleType:
    """scripts/fuzz/hostile_surfaces.py, the fuzzer's cases (a script folder, not a package)."""
    path = Path(__file__).resolve().parents[1] / "scripts/fuzz/hostile_surfaces.py"
    spec = importlib.util.spec_from_file_location("hostile_surfaces", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: ``opu-hal plan`` of 5 epochs over 54000 examples in batches of 256 at epsilon 8: the fuzzer's.
PLAN: list[str] = _fuzzer_surfaces().PLAN


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.err


@pytest.mark.parametrize(
    "extra, named",
    [
        (["--temperatures", "25", "25"], "--temperatures must be distinct values"),
        (["--temperatures", "25", "--exposures", "400", "400"], "--exposures must be distinct values"),
        (["--temperatures", "25", "--frames", "1000000000"], "--frames must be in [2, "),
        (["--temperatures", "25", "--frames", "1"], "--frames must be in [2, "),
        (
            ["--temperatures", "25", "--plot", "{tmp}/p.xyz"],
            "--plot {tmp}/p.xyz: the extension .xyz is not a plot format",
        ),
        (["--temperatures", "25", "--plot", "{tmp}/c.json"], "is the --out path"),
        (["--temperatures", "25", "--plot", "/proc/nope/p.png"], "--plot /proc/nope/p.png: not a writable file path"),
    ],
)
def test_calibrate_refuses_bad_options_before_measuring(extra, named, tmp_path, capsys):
    argv = [
        "calibrate",
        "opu-sim-dp",
        "--out",
        f"{tmp_path}/c.json",
        "--quiet",
        *[a.format(tmp=tmp_path) for a in extra],
    ]
    code, err = run_cli(argv, capsys)
    assert code == 2 and named.format(tmp=tmp_path) in err
    assert not (tmp_path / "c.json").exists()


def test_calibrate_refuses_an_out_path_in_proc_before_measuring(capsys):
    code, err = run_cli(["calibrate", "opu-sim-dp", "--out", "/proc/nope/c.json", "--temperatures", "25"], capsys)
    assert code == 2 and "--out /proc/nope/c.json: not a writable file path" in err


def test_calibrate_out_png_would_be_overwritten_by_its_plot_and_is_refused(tmp_path, capsys):
    code, err = run_cli(["calibrate", "opu-sim-dp", "--out", f"{tmp_path}/cal.png", "--temperatures", "25"], capsys)
    assert code == 2 and "the plot would overwrite the calibration" in err


@pytest.mark.parametrize("profile", ["torch-cpu", "torch-auto", "lighton-simulated"])
def test_calibrate_refuses_a_profile_without_a_camera(profile, tmp_path, capsys):
    code, err = run_cli(["calibrate", profile, "--out", f"{tmp_path}/c.json", "--temperatures", "25"], capsys)
    assert code == 2 and f"profile {profile!r}" in err
    assert "has no camera to calibrate" in err or "lacks the key(s)" in err  # lighton: names what lightonml lacks


def test_calibrate_a_profile_whose_temperature_range_is_one_point(tmp_path, capsys):
    profile = tmp_path / "point.toml"
    profile.write_text(
        'backend = "simulated"\nin_features = 4\nout_features = 64\ngain_e_per_dn = 1.0\n'
        "adc_bits = 12\nanchor_power_uw = 2.0\ntemperature_min_c = 25.0\ntemperature_max_c = 25.0\n"
    )
    code, err = run_cli(["calibrate", str(profile), "--out", f"{tmp_path}/c.json", "--frames", "4", "--quiet"], capsys)
    assert code == 0, err
    from opu_hal.calibration.schema import read_calibration

    assert read_calibration(tmp_path / "c.json").temperatures_c == [25.0]


@pytest.mark.parametrize(
    "extra, named",
    [
        (["--confidence", "-0.5"], "--confidence must be in (0, 1)"),
        (["--confidence", "0"], "--confidence must be in (0, 1)"),
        (["--confidence", "1"], "--confidence must be in (0, 1)"),
        (["--confidence", "nan"], "--confidence must be in (0, 1)"),
        (["--plot", "/proc/nope/p.png"], "--plot /proc/nope/p.png: /proc is not a writable folder"),
        (["--plot", "p.xyz"], "--plot p.xyz: the extension .xyz is not a plot format"),
    ],
)
def test_audit_refuses_bad_confidence_and_plot_before_training(extra, named, capsys, monkeypatch):
    from trainers import audit

    monkeypatch.setattr(audit, "audit_white_box", lambda *a, **k: pytest.fail("the audit ran"))
    code, err = run_cli(["audit", "--method", "dp-dfa", "--target-epsilon", "8", *extra], capsys)
    assert code == 2 and named in err


def test_train_out_in_proc_is_refused_before_training():
    from trainers.core.errors import TrainingConfigError
    from trainers.run.loop import check_output_path

    with pytest.raises(TrainingConfigError, match=r"--out /proc/nope/r.json: /proc is not a writable folder"):
        check_output_path("/proc/nope/r.json", "--out")
    check_output_path("relative-name.json", "--out")  # the working folder: writable


# -- calibration files: validated on load; one identity check for plan and train -------------------
import copy  # noqa: E402
import json  # noqa: E402

import opu_hal  # noqa: E402
from opu_hal.contract.errors import CalibrationError, ProfileError  # noqa: E402

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


def toml(keys: dict) -> str:
    return "\n".join(f"{k} = {json.dumps(v)}" for k, v in keys.items()) + "\n"


@pytest.fixture(scope="module")
def camera(tmp_path_factory):
    """A small camera profile (file) and its calibration (file) at 25 and 40 C."""
    from opu_hal.calibration.run import calibrate_device
    from opu_hal.calibration.schema import write_calibration

    folder = tmp_path_factory.mktemp("camera")
    (folder / "cam.toml").write_text(toml(CAMERA))
    with opu_hal.load_device(opu_hal.validate_profile(CAMERA)) as device:
        calibration = calibrate_device(device, [25.0, 40.0], [400.0], [100_000.0], frames=4, bootstrap=50)
    write_calibration(calibration, folder / "cal.json")
    return folder


def damaged(folder, name: str, change) -> str:
    data = json.loads((folder / "cal.json").read_text())
    change(data)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data))
    return str(path)


DAMAGES = {
    "short": (lambda d: d["operating_points"].pop(), "key 'operating_points' must hold one point per"),
    "long": (
        lambda d: d["operating_points"].append(copy.deepcopy(d["operating_points"][0])),
        "key 'operating_points' must hold one point per",
    ),
    "zero-anchor": (
        lambda d: d["operating_points"][0].update(anchor_power_uw=0.0),
        "key 'operating_points.0.anchor_power_uw': Input should be greater than 0",
    ),
    "negative-anchor": (
        lambda d: d["operating_points"][1].update(anchor_power_uw=-1.0),
        "key 'operating_points.1.anchor_power_uw': Input should be greater than 0",
    ),
    "negative-photons": (
        lambda d: d.update(photons_per_pixel_per_uw=-5.0),
        "key 'photons_per_pixel_per_uw': Input should be greater than 0",
    ),
    "dark-current-short": (lambda d: d["dark_current"].pop(), "key 'dark_current' must hold one point per"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_plan_info_and_train_refuse_an_inconsistent_calibration_naming_the_key(damage, camera, capsys):
    change, named = DAMAGES[damage]
    path = damaged(camera, damage, change)
    code, err = run_cli([*PLAN, "--profile", str(camera / "cam.toml"), "--calibration", path], capsys)
    assert code == 2 and path in err and named in err
    (camera / f"{damage}.toml").write_text(toml({**CAMERA, "calibration": f"{damage}.json"}))
    code, err = run_cli(["info", str(camera / f"{damage}.toml")], capsys)
    assert code == 2 and named in err
    with pytest.raises(CalibrationError, match="Input should be greater than 0|must hold one point per"):
        opu_hal.load_device(opu_hal.validate_profile({**CAMERA, "calibration": path}))  # what train loads


@pytest.mark.parametrize("epochs", ["nan", "inf", "-1"])
def test_plan_with_a_profile_refuses_non_finite_epochs(epochs, camera, capsys):
    argv = [*PLAN, "--profile", str(camera / "cam.toml"), "--calibration", str(camera / "cal.json")]
    argv[argv.index("--epochs") + 1] = epochs
    code, err = run_cli(argv, capsys)
    assert code == 2 and f"--epochs must be finite, > 0 and give at most 1e+08 steps, got {epochs}" in err


@pytest.mark.parametrize("profile", ["torch-cpu", "lighton-simulated"])
def test_plan_refuses_a_profile_without_a_camera(profile, camera, capsys):
    code, err = run_cli([*PLAN, "--profile", profile, "--calibration", str(camera / "cal.json")], capsys)
    assert code == 2 and f"plan --profile: profile {profile!r}" in err
    assert "declares no camera model to plan with" in err or "lacks the key(s)" in err


@pytest.mark.parametrize(
    "change, key",
    [
        ({"out_features": 128}, "device.out_features"),
        ({"seed": 4}, "device.seed"),
        ({"quantum_efficiency": 0.3}, "device.physics.quantum_efficiency"),
        ({"read_noise_e": 2.0}, "device.physics.read_noise_e"),
        ({"dark_fom_na_per_cm2": 0.5}, "device.physics.dark_fom_na_per_cm2"),
    ],
)
def test_plan_and_train_refuse_a_calibration_of_another_device_alike(change, key, camera, capsys):
    other = camera / f"other-{key}.toml"
    other.write_text(toml({**CAMERA, **change}))
    code, err = run_cli([*PLAN, "--profile", str(other), "--calibration", str(camera / "cal.json")], capsys)
    assert code == 2 and f"key '{key}'" in err and "taken on another device" in err
    with pytest.raises(CalibrationError, match=f"key '{key}'.*taken on another device"):
        opu_hal.load_device(opu_hal.validate_profile({**CAMERA, **change, "calibration": str(camera / "cal.json")}))


def test_plan_refuses_a_calibration_of_another_backend(camera, capsys):
    data = json.loads((camera / "cal.json").read_text())
    data["device"]["backend"] = "lighton"
    (camera / "lighton-cal.json").write_text(json.dumps(data))
    code, err = run_cli(
        [*PLAN, "--profile", str(camera / "cam.toml"), "--calibration", str(camera / "lighton-cal.json")], capsys
    )
    assert code == 2 and "key 'device.backend' is 'lighton'" in err


def test_a_calibration_without_physics_is_refused_as_unverifiable(camera, capsys):
    data = json.loads((camera / "cal.json").read_text())
    del data["device"]["physics"]
    (camera / "old.json").write_text(json.dumps(data))
    code, err = run_cli(
        [*PLAN, "--profile", str(camera / "cam.toml"), "--calibration", str(camera / "old.json")], capsys
    )
    assert code == 2 and "key 'device.physics' is missing" in err


def test_skellam_plan_rescales_the_calibration_to_the_profiles_anchor_power_as_train_does(camera, capsys):
    dim = {**CAMERA, "anchor_power_uw": 0.7}
    (camera / "dim.toml").write_text(toml(dim))
    # the Skellam source needs every gain of the interval within 0.5 / full scale of 1, which a 4-frame sweep
    # does not measure: the gain as if measured to 1e-5 (the rescaling is what this test checks)
    unity = damaged(camera, "unity", lambda d: d["gain_e_per_dn"].update(value=1.0, lower=1 - 1e-5, upper=1 + 1e-5))
    argv = [
        *PLAN,
        "--mechanism",
        "skellam",
        "--dimension",
        "1000",
        "--lattice-resolution",
        "10",
        "--sampling",
        "fixed",
        "--json",
        "--profile",
        str(camera / "dim.toml"),
        "--calibration",
        unity,
    ]
    assert main(argv) == 0
    plans = json.loads(capsys.readouterr().out)["plans"]
    with opu_hal.load_device(opu_hal.validate_profile({**dim, "calibration": unity})) as device:
        for plan in plans:  # the lower bound train plans its reads with, at the same anchor power
            device.set_options(temperature_c=plan["temperature_c"])
            lower, _ = device.calibration.anchor_read_lower_e(plan["temperature_c"])
            assert plan["supplied"] == pytest.approx(lower)
            assert plan["reads_per_value"] * lower >= plan["needed"]
    full = json.loads((camera / "cal.json").read_text())["operating_points"][0]["anchor_read_e_min_pixel_lower"]
    assert plans[0]["supplied"] < 0.5 * full  # 0.7 uW of a 2 uW calibration: about a third of the electrons


def test_a_torch_device_refuses_a_calibration_it_would_ignore(camera):
    torch_profile = {"backend": "torch", "in_features": 8, "out_features": 16, "device": "cpu"}
    with pytest.raises(ProfileError, match="key 'calibration'.*a torch profile has none"):
        opu_hal.load_device(opu_hal.validate_profile({**torch_profile, "calibration": str(camera / "cal.json")}))


def _dp_dfa_train_argv(**options: object) -> list[str]:
    """``opu-hal train --method dp-dfa`` with ``options``, one quiet epoch on digits at epsilon 8."""
    from tests.training_helpers import cli_argv

    return cli_argv("train", method="dp-dfa", **options, dataset="digits", epochs=1, target_epsilon=8, quiet=True)


def test_train_refuses_a_calibration_on_a_torch_profile_instead_of_ignoring_it(camera, capsys):
    code, err = run_cli(
        _dp_dfa_train_argv(profile="torch-cpu", calibration=camera / "cal.json"),
        capsys,
    )
    assert code == 2 and "has no camera a calibration could describe" in err and "torch-cpu" in err


def test_train_with_device_noise_refuses_a_short_calibration_naming_the_key(camera, capsys):
    path = damaged(camera, "short-train", DAMAGES["short"][0])
    code, err = run_cli(
        _dp_dfa_train_argv(noise_source="device", profile=camera / "cam.toml", calibration=path),
        capsys,
    )
    assert code == 2 and path in err and "key 'operating_points' must hold one point per" in err


# -- plugins: a broken one is skipped with a warning naming it; it never takes other commands down --
import sys  # noqa: E402
import textwrap  # noqa: E402
import warnings  # noqa: E402

from opu_hal.profiles.registry import refresh_entry_points  # noqa: E402

PLUGGED = """
    from typing import Literal
    from opu_hal import BackendSpec, BaseProfile
    from tests.test_registry import EchoDevice

    class PluggedProfile(BaseProfile):
        backend: Literal["plugged"]

    def failing(profile):
        raise RuntimeError("no such hardware")

    {spec}
"""


@pytest.fixture
def install(tmp_path, monkeypatch):
    """Install a plugin distribution (dist-info on sys.path) declaring ``group = {name: value}``."""

    def install(group: str, name: str, value: str, source: str) -> None:
        (tmp_path / "rel_plugin.py").write_text(textwrap.dedent(source))
        dist = tmp_path / "rel_plugin-0.1.dist-info"
        dist.mkdir(exist_ok=True)
        (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: rel-plugin\nVersion: 0.1\n")
        (dist / "entry_points.txt").write_text(f"[{group}]\n{name} = {value}\n")
        monkeypatch.syspath_prepend(str(tmp_path))
        monkeypatch.delitem(sys.modules, "rel_plugin", raising=False)
        refresh_entry_points()

    yield install
    monkeypatch.undo()
    sys.modules.pop("rel_plugin", None)
    refresh_entry_points()


def info_with_warnings(argv: list[str], capsys) -> tuple[int, str, str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(argv)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.err, " | ".join(str(w.message) for w in caught)


@pytest.mark.parametrize("group", ["opu_hal.backends", "opu_hal.commands"])
@pytest.mark.parametrize(
    "body, named",
    [
        ("raise KeyboardInterrupt", "failed to load: KeyboardInterrupt"),
        ("import sys; sys.exit(3)", "failed to load: SystemExit: 3"),
        ("raise ImportError('missing SDK')", "failed to load: ImportError: missing SDK"),
    ],
)
def test_a_plugin_failing_at_import_is_skipped_with_a_warning(group, body, named, install, capsys):
    install(group, "broken", "rel_plugin:SPEC", body + "\n")
    code, _err, warned = info_with_warnings(["info", "torch-cpu", "--json"], capsys)
    assert code == 0 and "'broken' (rel_plugin:SPEC) " + named in warned


@pytest.mark.parametrize(
    "source, named",
    [
        ("def register(sub):\n    raise RuntimeError('bad plugin')\n", "failed: RuntimeError: bad plugin"),
        ("def register(sub):\n    sub.add_parser('extra-cmd')\n    sub.add_parser('info')\n", "failed: ArgumentError"),
        ("def register(sub):\n    import sys; sys.exit(0)\n", "failed: SystemExit"),
    ],
)
def test_a_command_registration_that_fails_or_takes_a_name_is_undone(source, named, install, capsys):
    install("opu_hal.commands", "cmds", "rel_plugin:register", source)
    code, _err, warned = info_with_warnings(["info", "torch-cpu", "--json"], capsys)
    assert code == 0 and "rel_plugin.register " + named in warned and "its commands are ignored" in warned
    from opu_hal.cli import build_parser

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sub = next(a for a in build_parser()._actions if hasattr(a, "_name_parser_map"))
    assert "extra-cmd" not in sub._name_parser_map and "info" in sub._name_parser_map


def test_a_registration_replacing_a_command_without_argparse_noticing_is_undone(capsys):
    from opu_hal.cli import build_parser

    def sneaky(sub):
        sub._name_parser_map["info"] = sub._name_parser_map["devices"]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parser = build_parser([sneaky])
    assert any("replaced the command(s) info" in str(w.message) for w in caught)
    assert parser.parse_args(["info", "torch-cpu"]).func.__name__ == "_cmd_info"


def _info_of_plugged_profile(spec: str, install, tmp_path, capsys):
    """``opu-hal info`` of a profile whose backend is a plugin declaring ``spec``: (code, stderr, warnings)."""
    install("opu_hal.backends", "plugged", "rel_plugin:SPEC", PLUGGED.format(spec=spec))
    (tmp_path / "p.toml").write_text('backend = "plugged"\nin_features = 4\nout_features = 2\n')
    return info_with_warnings(["info", str(tmp_path / "p.toml")], capsys)


@pytest.mark.parametrize(
    "spec, named",
    [
        (
            'SPEC = BackendSpec("plugged", PluggedProfile, "rel_plugin:MISSING")',
            "failed for profile 'p': AttributeError",
        ),
        (
            'SPEC = BackendSpec("plugged", PluggedProfile, "no_such_module:Device")',
            "failed for profile 'p': ModuleNotFoundError",
        ),
        (
            "SPEC = BackendSpec('plugged', PluggedProfile, failing)",
            "failed for profile 'p': RuntimeError: no such hardware",
        ),
        (
            "SPEC = BackendSpec('plugged', PluggedProfile, lambda profile: None)",
            "returned NoneType, not an opu_hal Device",
        ),
    ],
)
def test_info_of_a_plugin_profile_whose_factory_fails_is_a_clear_error(spec, named, install, tmp_path, capsys):
    code, err, _ = _info_of_plugged_profile(spec, install, tmp_path, capsys)
    assert code == 2 and "backend 'plugged'" in err and named in err


@pytest.mark.parametrize(
    "spec, named",
    [
        ("SPEC = BackendSpec('plugged', dict, EchoDevice)", "profile model <class 'dict'> is not a subclass"),
        ("SPEC = BackendSpec('plugged', PluggedProfile, None)", "factory None is neither callable"),
    ],
)
def test_a_plugin_spec_with_no_profile_model_or_factory_is_ignored(spec, named, install, tmp_path, capsys):
    code, err, warned = _info_of_plugged_profile(spec, install, tmp_path, capsys)
    assert code == 2 and "key 'backend' is 'plugged'; allowed: " in err and named in warned
    code, _, _ = info_with_warnings(["info", "torch-cpu", "--json"], capsys)
    assert code == 0


def test_a_plugin_named_like_a_builtin_backend_is_refused_naming_both(install, capsys):
    from opu_hal.backends.simulated.profile import SPEC as BUILTIN

    install(
        "opu_hal.backends",
        "simulated",
        "rel_plugin:SPEC",
        "from opu_hal import BackendSpec\nfrom tests.test_registry import EchoDevice\n"
        "from opu_hal.backends.simulated.profile import SimulatedProfile\n"
        "SPEC = BackendSpec('simulated', SimulatedProfile, EchoDevice)\n",
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert opu_hal.get_backend("simulated") is BUILTIN
    warned = " | ".join(str(w.message) for w in caught)
    assert "rel_plugin:SPEC" in warned and "opu_hal.backends.simulated.profile:SPEC" in warned and "refused" in warned


# -- older surfaces -------------------------------------------------------------------------------
def test_info_of_a_maximal_lighton_simulated_profile_is_refused_before_allocating(tmp_path, capsys):
    (tmp_path / "lmax.toml").write_text(
        'backend = "lighton"\nsimulated = true\nin_features = 1039680\nout_features = 2219520\n'
    )
    code, err = run_cli(["info", str(tmp_path / "lmax.toml")], capsys)
    assert code == 2 and "keys 'in_features' x 'out_features' = 1039680 x 2219520 need about" in err


def test_project_refuses_a_matrix_too_slow_to_generate_that_info_accepts(tmp_path, capsys):
    (tmp_path / "smax.toml").write_text('backend = "simulated"\nin_features = 1039680\nout_features = 2219520\n')
    code, _ = run_cli(["info", str(tmp_path / "smax.toml"), "--json"], capsys)
    assert code == 0
    code, err = run_cli(["project", str(tmp_path / "smax.toml")], capsys)
    assert code == 2 and "matrix takes about" in err and "over --max-seconds 60" in err
    code, err = run_cli(["project", "opu-sim", "--max-seconds", "nan"], capsys)
    assert code == 2 and "--max-seconds must be finite and > 0" in err


@pytest.mark.parametrize("seed", [str(2**70), "-1"])
def test_project_seed_outside_63_bits_is_refused(seed, capsys):
    code, err = run_cli(["project", "torch-cpu", "--seed", seed], capsys)
    assert code == 2 and f"--seed must be in [0, 2^63 - 1], got {seed}" in err


def test_a_gain_that_quantizes_the_signal_away_is_refused_not_reported_as_noise(tmp_path, capsys):
    (tmp_path / "gain.toml").write_text(
        'backend = "simulated"\nin_features = 8\nout_features = 64\ngain_e_per_dn = 1e6\n'
    )
    for command in (["info"], ["project"]):
        code, err = run_cli([*command, str(tmp_path / "gain.toml")], capsys)
        assert code == 2 and "key 'gain_e_per_dn' = 1e+06 quantizes the signal away" in err
        assert "use gain_e_per_dn <= 30.9" in err
    for name in ("opu-sim", "opu-sim-dp", "opu-sim-intensity", "opu-sim-privacy"):  # shipped profiles dither
        opu_hal.load_device(name).close()


def test_the_largest_accepted_gain_still_gives_varying_values():
    keys = {"backend": "simulated", "in_features": 8, "out_features": 64, "gain_e_per_dn": 30.0, "compute": "cpu"}
    with opu_hal.load_device(opu_hal.validate_profile(keys)) as device:
        values = device.project(torch.ones(4, 8)).values
    assert float(values.std()) > 0


def test_train_on_an_empty_training_file_names_the_file(tmp_path, capsys):
    import struct

    import numpy as np

    def idx(name: str, array: np.ndarray) -> None:
        header = struct.pack(">HBB", 0, 8, array.ndim) + struct.pack(">" + "I" * array.ndim, *array.shape)
        (tmp_path / name).write_bytes(header + array.astype(np.uint8).tobytes())

    idx("train-images-idx3-ubyte", np.zeros((0, 28, 28)))
    idx("train-labels-idx1-ubyte", np.zeros((0,)))
    idx("t10k-images-idx3-ubyte", np.zeros((10, 28, 28)))
    idx("t10k-labels-idx1-ubyte", np.arange(10))
    code, err = run_cli(["train", "--method", "dfa", "--data-dir", str(tmp_path), "--epochs", "1", "--quiet"], capsys)
    assert code == 2 and f"{tmp_path}/train-images-idx3-ubyte: the IDX files hold 0 images" in err


def test_torch_matrix_memory_counts_its_float64_draw(monkeypatch):
    from opu_hal.backends import torch_backend

    monkeypatch.setattr(
        torch_backend, "available_bytes", lambda: 2 * 30000 * 30000 * 4 + 1
    )  # float32 fits, the draw not
    profile = opu_hal.validate_profile(
        {"backend": "torch", "in_features": 30000, "out_features": 30000, "device": "cpu"}
    )
    with pytest.raises(ProfileError, match="need a .* GiB matrix"):
        opu_hal.load_device(profile)


def test_a_projection_of_100000_rows_and_a_30000_square_torch_matrix_under_a_4_gib_cap_are_refused():
    import subprocess
    import sys as _sys

    code = (
        "import torch, opu_hal\n"
        "with opu_hal.load_device('opu-sim') as d:\n"
        "    try:\n"
        "        d.project(torch.zeros(100_000, d.in_features)); print('projected')\n"
        "    except opu_hal.HostMemoryError as exc:\n"
        "        print('refused:', exc)\n"
        "torch_profile = {'backend': 'torch', 'in_features': 30000, 'out_features': 30000, 'device': 'cpu'}\n"
        "try:\n"
        "    opu_hal.load_device(opu_hal.validate_profile(torch_profile)); print('loaded')\n"
        "except opu_hal.ProfileError as exc:\n"
        "    print('refused:', exc)\n"
    )
    cap = lambda: resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))  # noqa: E731
    done = subprocess.run(
        [_sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=cap,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-500:]
    assert "refused: a batch of 100000 rows needs about" in done.stdout  # checked when projected
    assert "30000 x 30000 need a" in done.stdout


def test_plot_refuses_an_extension_matplotlib_cannot_write_before_reading_records(tmp_path, capsys):
    code, err = run_cli(["plot", str(tmp_path / "missing.json"), "--out", str(tmp_path / "curves.xyz")], capsys)
    assert code == 2 and "the extension .xyz is not a plot format" in err


def test_privacy_counts_name_the_model_when_its_read_mean_is_below_the_calibrations_bound():
    from opu_hal.backends.simulated.privacy_noise import draw_counts
    from opu_hal.randomness.secure_random import SecureGenerator

    with opu_hal.load_device("opu-sim-dp") as device:
        read = device.anchor_read_e
        low = draw_counts(
            SecureGenerator(),
            device.sensor,
            read,
            8,
            1000.0,
            "t",
            read_mean_lower_e=2 * read,
            mean_source="calibration X",
        )
        high = draw_counts(
            SecureGenerator(),
            device.sensor,
            read,
            8,
            1000.0,
            "t",
            read_mean_lower_e=read / 2,
            mean_source="calibration X",
        )
    assert low.distribution.mean_source.startswith("model (the profile's declared camera")
    assert "calibration X" in low.distribution.mean_source
    assert low.distribution.reads_per_value * read >= 1000 > (low.distribution.reads_per_value - 1) * read
    assert high.distribution.mean_source == "calibration X"
