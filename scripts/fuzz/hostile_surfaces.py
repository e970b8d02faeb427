"""Hostile inputs to the surfaces of issue 32 (files the commands read, calibration files, output
paths) and to plugins (entry points that fail, shadow or hang): cases for :mod:`hostile_inputs`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import opu_hal

CAMERA = {
    "backend": "simulated",
    "in_features": 4,
    "out_features": 64,
    "seed": 3,
    "gain_e_per_dn": 1.0,
    "adc_bits": 12,
    "black_level_dn": 64,
    "anchor_power_uw": 2.0,
    # a flat-beam camera: calibrating a speckle anchor also maps all 2.2 M pixels (64 frames, tens of
    # seconds on a loaded 2-core machine), which the speckle tests cover (tests/test_speckle_anchor.py)
    "privacy_anchor": "reference-beam",
}
PLAN = [
    "plan",
    "--dataset-size",
    "54000",
    "--batch-size",
    "256",
    "--epochs",
    "5",
    "--target-epsilon",
    "8",
    "--sensitivity",
    "1",
]
SKELLAM = ["--mechanism", "skellam", "--dimension", "1000", "--lattice-resolution", "10", "--sampling", "fixed"]
# A 4-frame calibration does not prove unity gain, so a flat-beam camera's counts are accounted as
# digitized reads (the Skellam plan is refused, naming the digitized mechanism).
DIGITIZED = ["digitized" if arg == "skellam" else arg for arg in SKELLAM]
CALIBRATION_DAMAGES = {
    "short": lambda d: d["operating_points"].pop(),
    "long": lambda d: d["operating_points"].append(dict(d["operating_points"][0])),
    "zero-anchor": lambda d: d["operating_points"][0].update(anchor_power_uw=0.0),
    "negative-anchor": lambda d: d["operating_points"][0].update(anchor_power_uw=-1.0),
    "negative-photons": lambda d: d.update(photons_per_pixel_per_uw=-5.0),
    "no-physics": lambda d: d["device"].pop("physics", None),
    "dark-current-short": lambda d: d["dark_current"].pop(),
}


def _toml(keys: dict) -> str:
    return "".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items())


def issue32_files(folder: Path) -> None:
    """The profiles, calibrations and data files the issue-32 cases name, written under ``folder``."""
    import struct

    import numpy as np

    from opu_hal.calibration.run import calibrate_device
    from opu_hal.calibration.schema import write_calibration

    folder.mkdir(parents=True, exist_ok=True)
    with opu_hal.load_device(opu_hal.validate_profile(CAMERA)) as device:
        calibration = calibrate_device(device, [25.0, 40.0], [400.0], [100_000.0], frames=4, bootstrap=20)
    write_calibration(calibration, folder / "cal.json")
    for name, damage in CALIBRATION_DAMAGES.items():
        data = json.loads((folder / "cal.json").read_text())
        damage(data)
        (folder / f"{name}.json").write_text(json.dumps(data))
        (folder / f"cal-{name}.toml").write_text(_toml({**CAMERA, "calibration": f"{name}.json"}))
    profiles = {
        "cam": CAMERA,
        "dim": {**CAMERA, "anchor_power_uw": 0.7},
        "qe": {**CAMERA, "quantum_efficiency": 0.3},
        "wide": {**CAMERA, "out_features": 128},
        "point": {**CAMERA, "temperature_min_c": 25.0, "temperature_max_c": 25.0},
        "gain": {"backend": "simulated", "in_features": 8, "out_features": 64, "gain_e_per_dn": 1e6},
        "lmax": {"backend": "lighton", "simulated": True, "in_features": 1039680, "out_features": 2219520},
        "smax": {"backend": "simulated", "in_features": 1039680, "out_features": 2219520},
    }
    for name, keys in profiles.items():
        (folder / f"{name}.toml").write_text(_toml(keys))
    data = folder / "empty-data"
    data.mkdir(exist_ok=True)
    for name, array in (
        ("train-images-idx3-ubyte", np.zeros((0, 28, 28))),
        ("train-labels-idx1-ubyte", np.zeros(0)),
        ("t10k-images-idx3-ubyte", np.zeros((10, 28, 28))),
        ("t10k-labels-idx1-ubyte", np.arange(10)),
    ):
        header = struct.pack(">HBB", 0, 8, array.ndim) + struct.pack(">" + "I" * array.ndim, *array.shape)
        (data / name).write_bytes(header + array.astype(np.uint8).tobytes())


def issue32_valid_argvs(d: Path) -> list[list[str]]:
    """Issue 32's command lines that are valid (answered, exit 0 or plan's 1); ``d`` holds :func:`issue32_files`."""
    cal = str(d / "cal.json")
    return [
        ["calibrate", str(d / "point.toml"), "--out", str(d / "point.json"), "--quiet", "--frames", "4"],
        [*PLAN, "--profile", str(d / "cam.toml"), "--calibration", cal],
        [*PLAN, *DIGITIZED, "--profile", str(d / "dim.toml"), "--calibration", cal],
    ]


def issue32_argvs(d: Path) -> list[list[str]]:
    """Issue 32's hostile command lines, each to be refused (exit 2 naming the option, key or file)."""
    cal, out = str(d / "cal.json"), str(d / "c.json")
    calibrate = ["calibrate", "opu-sim-dp", "--quiet", "--frames", "4"]
    dp_dfa = ["train", "--method", "dp-dfa", "--dataset", "digits", "--epochs", "1", "--target-epsilon", "8", "--quiet"]
    audit = ["audit", "--method", "dp-dfa", "--dataset", "digits", "--epochs", "1", "--target-epsilon", "8", "--quiet"]
    return [
        [*calibrate, "--temperatures", "25", "25", "--out", out],
        [*calibrate, "--temperatures", "25", "--frames", "1000000000", "--out", out],
        ["calibrate", "torch-cpu", "--out", out],
        ["calibrate", "torch-auto", "--out", out],
        ["calibrate", "lighton-simulated", "--out", out],
        [*calibrate, "--temperatures", "25", "--out", "/proc/nope/c.json"],
        [*calibrate, "--temperatures", "25", "--out", out, "--plot", "/proc/nope/p.png"],
        [*calibrate, "--temperatures", "25", "--out", out, "--plot", str(d / "p.xyz")],
        [*calibrate, "--temperatures", "25", "--out", out, "--plot", out],
        [*calibrate, "--temperatures", "25", "--out", str(d / "cal.png")],
        *[[*PLAN[:6], v, *PLAN[7:], "--profile", str(d / "cam.toml"), "--calibration", cal] for v in ("nan", "inf")],
        *[[*PLAN, "--profile", p, "--calibration", cal] for p in ("torch-cpu", "lighton-simulated")],
        *[
            [*PLAN, "--profile", str(d / "cam.toml"), "--calibration", str(d / f"{n}.json")]
            for n in CALIBRATION_DAMAGES
        ],
        *[[*PLAN, "--profile", str(d / f"{p}.toml"), "--calibration", cal] for p in ("qe", "wide")],
        [*PLAN, *SKELLAM, "--profile", str(d / "dim.toml"), "--calibration", cal],  # unity gain not proven
        *[
            [
                *dp_dfa,
                "--noise-source",
                "device",
                "--profile",
                str(d / "cam.toml"),
                "--calibration",
                str(d / f"{n}.json"),
            ]
            for n in ("short", "long", "zero-anchor")
        ],
        [*dp_dfa, "--profile", "torch-cpu", "--calibration", cal],
        [*dp_dfa, "--out", "/proc/nope/r.json"],
        ["train", "--method", "dfa", "--data-dir", str(d / "empty-data"), "--epochs", "1", "--quiet"],
        *[[*audit, "--confidence", v] for v in ("-0.5", "0", "1", "nan")],
        *[[*audit, "--plot", p] for p in ("/proc/nope/p.png", str(d / "p.xyz"))],
        *[["info", str(d / f"cal-{n}.toml")] for n in CALIBRATION_DAMAGES],
        ["info", str(d / "lmax.toml")],
        ["info", str(d / "gain.toml")],
        ["project", str(d / "gain.toml")],
        ["project", str(d / "smax.toml")],
        ["project", "torch-cpu", "--seed", str(2**70)],
    ]


class _Hang(Exception):
    pass


def inprocess_cli_case(argv: list[str], timeout: int, hostile: bool):
    """Classify one command run in this process (``trainers.cli.main``: every command), with a
    SIGALRM deadline for hangs; the same outcomes as :func:`cli_case`, without a start-up per case.
    A ``hostile`` command that is answered is ``silent`` (it had to be refused)."""

    def case():
        import contextlib
        import io
        import signal

        from trainers.cli import main as cli_main

        def expire(*_):
            raise _Hang()

        out, err = io.StringIO(), io.StringIO()
        previous = signal.signal(signal.SIGALRM, expire)
        signal.alarm(timeout)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = cli_main(argv)
        except SystemExit as exc:  # argparse refusals
            code = exc.code
        except _Hang:
            return "hang"
        except BaseException as exc:  # noqa: BLE001 - the fuzz counts exactly these
            return f"traceback: {type(exc).__name__}: {str(exc)[:100]}"
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
        if code == 2 and "error:" in err.getvalue():
            return "clear"
        answered = code == 0 or (code == 1 and argv[0] == "plan")  # plan: 1 = "no point reaches the target"
        if answered:
            return "silent" if hostile or "nan" in out.getvalue().lower().split() else "accepted"
        return f"traceback: exit {code}: {err.getvalue().strip()[-100:]}"

    return case


def issue32_cases(folder: Path, timeout: int = 30) -> list[tuple[str, object]]:
    """Issue 32's cases, labelled like the others; writes their files under ``folder`` first."""
    issue32_files(folder)
    return [(f"cli {' '.join(a)}", inprocess_cli_case(a, timeout, hostile=True)) for a in issue32_argvs(folder)] + [
        (f"cli {' '.join(a)}", inprocess_cli_case(a, timeout, hostile=False)) for a in issue32_valid_argvs(folder)
    ]


# -- issue 32: broken plugins (entry points) never take the other commands down -------------------
PLUGIN_PROFILE = """
from typing import Literal
from opu_hal import BackendSpec, BaseProfile

class PluggedProfile(BaseProfile):
    backend: Literal["plugged"]

def failing(profile):
    raise RuntimeError("no such hardware")
"""
PLUGINS = [  # (label, entry-point group, module source, command, hostile)
    *[
        (f"{group} import raises {what}", group, body, ["info", "torch-cpu", "--json"], False)
        for group in ("opu_hal.backends", "opu_hal.commands")
        for what, body in (
            ("KeyboardInterrupt", "raise KeyboardInterrupt\n"),
            ("sys.exit", "import sys\nsys.exit(3)\n"),
            ("ImportError", "raise ImportError('missing SDK')\n"),
        )
    ],
    (
        "register raises",
        "opu_hal.commands",
        "def SPEC(sub):\n    raise RuntimeError('bad')\n",
        ["info", "torch-cpu", "--json"],
        False,
    ),
    (
        "register adds a second info",
        "opu_hal.commands",
        "def SPEC(sub):\n    sub.add_parser('info')\n",
        ["info", "torch-cpu", "--json"],
        False,
    ),
    (
        "factory missing",
        "opu_hal.backends",
        PLUGIN_PROFILE + "SPEC = BackendSpec('plugged', PluggedProfile, 'no_mod:X')\n",
        ["info", "{dir}/plugged.toml"],
        True,
    ),
    (
        "factory raises",
        "opu_hal.backends",
        PLUGIN_PROFILE + "SPEC = BackendSpec('plugged', PluggedProfile, failing)\n",
        ["info", "{dir}/plugged.toml"],
        True,
    ),
    (
        "factory returns None",
        "opu_hal.backends",
        PLUGIN_PROFILE + "SPEC = BackendSpec('plugged', PluggedProfile, lambda p: None)\n",
        ["info", "{dir}/plugged.toml"],
        True,
    ),
    (
        "profile model not a model",
        "opu_hal.backends",
        PLUGIN_PROFILE + "SPEC = BackendSpec('plugged', dict, failing)\n",
        ["info", "{dir}/plugged.toml"],
        True,
    ),
]
SHADOW = (
    "from opu_hal import BackendSpec\nfrom opu_hal.backends.simulated.profile import SimulatedProfile\n"
    "SPEC = BackendSpec('simulated', SimulatedProfile, lambda p: None)\n"
)


def _installed(folder: Path, group: str, source: str):
    """A context that installs a plugin distribution declaring ``group: plugin = corpus_plugin:SPEC``."""
    import contextlib

    from opu_hal.profiles.registry import refresh_entry_points

    @contextlib.contextmanager
    def installed():
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "corpus_plugin.py").write_text(source)
        dist = folder / "corpus_plugin-0.1.dist-info"
        dist.mkdir(exist_ok=True)
        (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: corpus-plugin\nVersion: 0.1\n")
        (dist / "entry_points.txt").write_text(f"[{group}]\nplugin = corpus_plugin:SPEC\n")
        sys.path.insert(0, str(folder))
        sys.modules.pop("corpus_plugin", None)
        refresh_entry_points()
        try:
            yield
        finally:
            sys.path.remove(str(folder))
            sys.modules.pop("corpus_plugin", None)
            refresh_entry_points()

    return installed()


def plugin_cases(folder: Path, timeout: int = 30) -> list[tuple[str, object]]:
    """Issue 32's plugin cases: each installs a broken plugin, runs one command, uninstalls it."""
    import warnings

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plugged.toml").write_text('backend = "plugged"\nin_features = 4\nout_features = 2\n')
    cases = []
    for i, (label, group, source, argv, hostile) in enumerate(PLUGINS):

        def case(i=i, group=group, source=source, argv=argv, hostile=hostile):
            command = [a.replace("{dir}", str(folder)) for a in argv]
            with _installed(folder / f"plugin{i}", group, source), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return inprocess_cli_case(command, timeout, hostile)()

        cases.append((f"plugin {label}: {' '.join(argv)}", case))

    def shadow() -> str:
        from opu_hal.backends.simulated.profile import SPEC as BUILTIN

        with _installed(folder / "shadow", "opu_hal.backends", SHADOW), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            kept = opu_hal.get_backend("simulated") is BUILTIN
        named = any("corpus_plugin:SPEC" in str(w.message) for w in caught)
        return "clear" if kept and named else "silent"

    cases.append(("plugin named 'simulated' later on sys.path", shadow))
    return cases
