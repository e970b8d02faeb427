"""Fuzz of hostile inputs (issue 15): bad profiles, bad batches and bad command-line arguments.

Each input is classified: ``clear`` (an ``OpuHalError`` or an argparse message naming the option,
exit 2), ``accepted`` (a valid input that worked and returned finite values), ``traceback``
(an untyped exception), ``hang`` (no answer within the timeout) or ``silent`` (accepted but a
wrong result: non-finite values, exit 0 with NaN printed, or an answer to an input that must be
refused). Issue 32's cases (calibrate, plan --profile, train, audit, older surfaces, broken plugins)
run in-process with a deadline, so they stay fast. Prints the counts and writes
``results/fuzz/hostile_inputs.json``.

    python scripts/fuzz/hostile_inputs.py [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import torch

import opu_hal
from opu_hal.contract.errors import OpuHalError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_surfaces import PLUGINS, issue32_cases, issue32_valid_argvs, plugin_cases  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
PROFILES = {
    "simulated": {"backend": "simulated", "in_features": 8, "out_features": 64},
    "torch": {"backend": "torch", "in_features": 8, "out_features": 64, "device": "cpu"},
    "lighton": {"backend": "lighton", "in_features": 8, "out_features": 64, "simulated": True},
}
KEYS = {
    "simulated": [
        "exposure_us",
        "laser_power_uw",
        "anchor_power_uw",
        "quantum_efficiency",
        "full_well_e",
        "block_mb",
        "cache_mb",
        "gain_e_per_dn",
        "read_noise_e",
        "pixel_pitch_um",
        "sensor_pixels",
        "black_level_dn",
        "dark_fom_na_per_cm2",
        "temperature_c",
        "temperature_min_c",
        "wavelength_nm",
        "adc_bits",
        "dsnu_rms",
        "hot_pixel_fraction",
        "in_features",
        "out_features",
        "seed",
        "mode",
    ],
    "torch": ["noise_std", "matrix_std", "in_features", "out_features", "seed", "device", "dtype", "input_kind"],
    "lighton": [
        "retries",
        "backoff_s",
        "timeout_s",
        "noise_std",
        "exposure_us",
        "frametime_us",
        "in_features",
        "out_features",
        "mode",
        "rescale",
    ],
}
VALUES = [1e-300, 1e308, -1, 0, float("nan"), float("inf"), 2**64, 2**63, 10**9, "x", None, True, [1]]


def classify_profile(profile: dict) -> str:
    try:
        with opu_hal.load_device(opu_hal.validate_profile(profile)) as device:
            x = (torch.rand(2, device.in_features) < 0.5).float()
            values = device.project(x).values
            return "accepted" if bool(torch.isfinite(values).all()) else "silent"
    except OpuHalError:
        return "clear"
    except Exception as exc:  # noqa: BLE001 - the fuzz counts exactly these
        return f"traceback: {type(exc).__name__}: {str(exc)[:100]}"


def profile_cases():
    for backend, keys in KEYS.items():
        for key, value in itertools.product(keys, VALUES):
            profile = dict(PROFILES[backend])
            if value is None:
                profile.pop(key, None)
            else:
                profile[key] = value
            yield f"profile {backend} {key}={value!r}", (lambda p=profile: classify_profile(p))


def batch_cases():
    batches = {
        "nan": lambda n: torch.full((2, n), float("nan")),
        "inf": lambda n: torch.full((2, n), float("inf")),
        "wide": lambda n: torch.zeros(2, n + 1),
        "rank3": lambda n: torch.zeros(2, n, 1),
        "empty": lambda n: torch.zeros(0, n),
        "complex": lambda n: torch.zeros(2, n, dtype=torch.complex64),
        "sparse": lambda n: torch.zeros(2, n).to_sparse(),
        "meta": lambda n: torch.zeros(2, n, device="meta"),
        "bfloat16": lambda n: torch.ones(2, n, dtype=torch.bfloat16),
        "halves": lambda n: torch.full((2, n), 0.5),
        "string": lambda n: "not a batch",
        "list": lambda n: [[1] * n, [0] * n],
        "huge": lambda n: torch.full((2, n), 3e38),
    }
    for name in ("opu-sim", "opu-sim-dp", "torch-cpu", "lighton-simulated"):
        for label, make in batches.items():

            def case(name=name, make=make):
                try:
                    with opu_hal.load_device(name) as device:
                        values = device.project(make(device.in_features)).values
                        return "accepted" if bool(torch.isfinite(values).all()) else "silent"
                except OpuHalError:
                    return "clear"
                except Exception as exc:  # noqa: BLE001
                    return f"traceback: {type(exc).__name__}: {str(exc)[:100]}"

            yield f"batch {name} {label}", case


RUN = ["--dataset-size", "60000", "--batch-size", "256", "--epochs", "15"]
CLI = (
    [["account", *RUN, "--noise-multiplier", v] for v in ("nan", "inf", "1e-300", "-1", "0", "1e308")]
    + [
        ["account", "--dataset-size", "60000", "--batch-size", "256", "--steps", v, "--noise-multiplier", "1"]
        for v in ("10000000000", "-5", "0", "1e10")
    ]
    + [["plan", *RUN, "--target-epsilon", v] for v in ("nan", "inf", "1e-300", "-1", "0")]
    + [
        ["account", "--dataset-size", v, "--batch-size", "256", "--epochs", "1", "--noise-multiplier", "1"]
        for v in ("0", "-1", "1", "99999999999999999999")
    ]
    + [["noise", "opu-sim", "--points", v] for v in ("0", "-3", "10000000")]
    + [["project", "torch-cpu", "--batch", v] for v in ("-1", "0", "100000000000")]
    + [
        ["train", "--method", "dfa", "--epochs", "1", *extra]
        for extra in (
            ["--hidden", "100000000"],
            ["--hidden", "60000,60000"],
            ["--seed", "-1"],
            ["--seed", "18446744073709551616"],
            ["--epochs", "0"],
            ["--batch-size", "0"],
            ["--lr", "nan"],
            ["--lr", "inf"],
            ["--hidden", "a,b"],
            ["--train-limit", "0"],
            ["--out", "/"],
            ["--checkpoint", "/"],
            ["--profile", "/etc/passwd"],
        )
    ]
    + [
        ["train", "--method", "dp-dfa", "--epochs", "1", *extra]
        for extra in (
            ["--target-epsilon", "nan"],
            ["--target-epsilon", "inf"],
            ["--target-epsilon", "8", "--delta", "0"],
            ["--target-epsilon", "8", "--tau-e", "nan"],
            ["--target-epsilon", "8", "--lattice-resolution", "1e9"],
            ["--noise-multiplier", "-1"],
            ["--target-epsilon", "8", "--calibration", "/nonexistent.json", "--noise-source", "device"],
        )
    ]
    + [["table", p] for p in ("/nonexistent.json", "/etc/passwd", "/dev/null", "/")]
    + [["plot", p, "--out", "/tmp/opu-hal-fuzz.png"] for p in ("/nonexistent.json", "/etc/hostname")]
    + [
        ["calibrate", "opu-sim", "--out", "/", "--temperatures", "25"],
        ["calibrate", "opu-sim", "--out", "/tmp/opu-hal-fuzz.json", "--temperatures", "nan"],
        ["calibrate", "opu-sim", "--out", "/tmp/opu-hal-fuzz.json", "--frames", "1"],
        ["audit", "--method", "dp-dfa", "--canaries", "0", "--target-epsilon", "8"],
        ["audit", "--method", "dfa"],
        ["audit", "--method", "dp-dfa", "--confidence", "1.5", "--target-epsilon", "8"],
        ["info", "nonexistent-profile"],
        ["info", "/etc/passwd"],
        ["devices", "--dir", "/nonexistent"],
    ]
)


def cli_case(argv: list[str], timeout: float):
    def case():
        try:
            done = subprocess.run(
                [sys.executable, "-m", "opu_hal.cli", *argv], cwd=ROOT, capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            return "hang"
        if "Traceback" in done.stderr:
            return "traceback: " + done.stderr.strip().splitlines()[-1][:100]
        if done.returncode == 2 and "error:" in done.stderr:
            return "clear"
        if done.returncode == 0:
            return "silent" if "nan" in done.stdout.lower().split() else "accepted"
        return f"traceback: exit {done.returncode}: {done.stderr.strip()[-100:]}"

    return case


# -- issue 32: calibrate, plan --profile, audit, train and older surfaces, run in-process (fast) ----
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds before a command counts as a hang")
    parser.add_argument("--out", default=str(ROOT / "results/fuzz/hostile_inputs.json"))
    args = parser.parse_args()
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="opu-hal-fuzz-"))
    cases = (
        list(profile_cases()) + list(batch_cases()) + [(f"cli {' '.join(a)}", cli_case(a, args.timeout)) for a in CLI]
    )
    cases += issue32_cases(folder, timeout=int(min(args.timeout, 60)))
    cases += plugin_cases(folder / "plugins", timeout=int(min(args.timeout, 60)))
    outcomes = {}
    for i, (label, case) in enumerate(cases, 1):
        outcomes[label] = case()
        if outcomes[label].startswith(("traceback", "hang", "silent")):
            print(f"{outcomes[label]:>12}  {label}", flush=True)
        if i % 100 == 0:
            print(f"... {i}/{len(cases)}", file=sys.stderr, flush=True)
    counts = Counter(o.split(":")[0] for o in outcomes.values())
    summary = {
        "inputs": len(cases),
        **{k: counts.get(k, 0) for k in ("clear", "accepted", "traceback", "hang", "silent")},
    }
    print(json.dumps(summary))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"summary": summary, "outcomes": outcomes}, indent=1) + "\n")
    return 0 if summary["traceback"] == summary["hang"] == summary["silent"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
