"""The device side of the API corpus (:mod:`api_corpus`): ``attach_dfa``, ``calibrate`` and ``plan``
with hostile arguments, calibration files damaged or physically implausible, and another device's
calibration."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

NAN, INF = float("nan"), float("inf")
Case = tuple[str, Callable[[], str]]
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
}


def attach_case(model: Any, method: Any, device: Any, threshold: Any, reduction: Any, valid: bool) -> Callable[[], str]:
    """``attach_dfa`` then one backward: ``accepted`` with finite gradients of a valid input (non-zero
    ones below a threshold of 0.5, where the ternarized error cannot vanish)."""

    def run() -> str:
        from trainers.api import attach_dfa

        attach_dfa(model, method, device, threshold=threshold, loss_reduction=reduction)
        x, y = torch.randn(8, 5), torch.randint(0, 3, (8,))
        F.cross_entropy(model(x), y).backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        finite = bool(grads) and all(bool(torch.isfinite(g).all()) for g in grads)
        moving = any(bool(g.abs().sum() > 0) for g in grads) or not (isinstance(threshold, float) and threshold < 0.5)
        return "accepted" if valid and finite and moving else "silent"

    return run


def attach_cases() -> list[Case]:
    def mlp() -> nn.Module:
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3))

    cases: list[Case] = []
    for method in ("dfa", "tdfa", "pdfa", "DFA", "bogus", None, 3, "", "dp-dfa"):
        device = "torch-cpu"  # pdfa needs a binary-input device: refused on torch-cpu
        valid = method in ("dfa", "tdfa")
        cases.append((f"attach_dfa method={method!r}", attach_case(mlp(), method, device, 0.15, "mean", valid)))
    for threshold in (NAN, INF, -1, 0.0, 0.15, 0.99, 1, "x", None, 1e-300):
        valid = isinstance(threshold, float) and math.isfinite(threshold) and 0 <= threshold < 1
        label = f"attach_dfa tdfa threshold={threshold!r}"
        cases.append((label, attach_case(mlp(), "tdfa", "torch-cpu", threshold, "mean", valid)))
    for reduction in ("mean", "sum", "avg", None, "MEAN"):
        valid = reduction in ("mean", "sum")
        cases.append(
            (f"attach_dfa loss_reduction={reduction!r}", attach_case(mlp(), "dfa", None, 0.15, reduction, valid))
        )
    for device in (None, "torch-cpu", 42, "nonexistent-profile", "/etc/passwd", 2.5):
        valid = device in (None, "torch-cpu")
        cases.append((f"attach_dfa device={device!r}", attach_case(mlp(), "dfa", device, 0.15, "mean", valid)))
    for label, model in (
        ("a list", [nn.Linear(5, 3)]),
        ("no Linear", nn.Sequential(nn.Tanh())),
        ("a string", "mlp"),
        ("None", None),
    ):
        cases.append((f"attach_dfa model {label}", attach_case(model, "dfa", "torch-cpu", 0.15, "mean", False)))
    return cases


def calibrate_cases(folder: Path) -> list[Case]:
    """Arguments ``calibrate`` must refuse before it measures (quick: nothing is measured)."""
    from trainers.api import calibrate

    base: dict[str, Any] = dict(temperatures=[25.0], frames=4, bootstrap=20)
    changes: list[tuple[Any, dict[str, Any]]] = [
        ("torch-cpu", {}),
        ("lighton-simulated", {}),
        (42, {}),
        ("nonexistent-profile", {}),
        ("/etc/passwd", {}),
        *[("opu-sim-dp", {"temperatures": t}) for t in ([25.0, 25.0], [NAN], [INF], [], "25", [None], 25.0)],
        *[("opu-sim-dp", {"exposures": e}) for e in ([0.0], [-1.0], [NAN], [100.0, 100.0])],
        *[("opu-sim-dp", {"dark_exposures": e}) for e in ([0.0], [NAN])],
        *[("opu-sim-dp", {"frames": f}) for f in (0, 1, 2.5, -1, NAN, 10**9, "4")],
        *[("opu-sim-dp", {"bootstrap": b}) for b in (0, -1, "x", NAN, 2.5)],
        *[("opu-sim-dp", {"seed": s}) for s in (-1, NAN, 2**64, "0")],
        *[("opu-sim-dp", {"out": o}) for o in ("/proc/nope/c.json", "/", str(folder), 42)],
    ]

    def case(device: Any, change: dict[str, Any]) -> Callable[[], str]:
        return lambda: (calibrate(device, **{**base, **change}), "silent")[1]

    return [(f"calibrate {device!r} {change}", case(device, change)) for device, change in changes]


def camera_files(folder: Path) -> tuple[Path, Path, Any]:
    """The camera profile file and its calibration (file and object), made once under ``folder``."""
    from trainers.api import calibrate

    folder.mkdir(parents=True, exist_ok=True)
    profile, path = folder / "cam.toml", folder / "cal.json"
    profile.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in CAMERA.items()))
    import opu_hal

    with opu_hal.load_device(opu_hal.validate_profile(CAMERA)) as device:
        calibration = calibrate(device, [25.0, 40.0], [400.0], [100_000.0], frames=4, bootstrap=30, out=path)
    return profile, path, calibration


def _ops(d: dict[str, Any], **values: Any) -> None:
    for op in d["operating_points"]:
        op.update(values)


DAMAGES: dict[str, Callable[[dict[str, Any]], Any]] = {
    "negative anchor e-": lambda d: _ops(d, anchor_e={**d["operating_points"][0]["anchor_e"], "lower": -6.0}),
    "1e9 e- per read": lambda d: _ops(d, anchor_read_e_min_pixel_lower=1e9, anchor_e_max_pixel_upper=1e9),
    "negative saturation": lambda d: d.update(saturation_e={**d["saturation_e"], "lower": -6.0}),
    "negative read noise": lambda d: d.update(read_noise_e={**d["read_noise_e"], "lower": -1.0}),
    "negative anchor power": lambda d: _ops(d, anchor_power_uw=-1.0),
    "zero anchor power": lambda d: d.update(anchor_power_uw=0.0),
    "dark e- above the full well": lambda d: _ops(d, dark_e={**d["operating_points"][0]["dark_e"], "upper": 1e9}),
    "saturation above the ADC": lambda d: d.update(saturation_e={**d["saturation_e"], "upper": 1e12}),
    "short": lambda d: d["operating_points"].pop(),
    "no physics": lambda d: d["device"].pop("physics", None),
    "schema 1": lambda d: d.update(schema_version=1),
}
SHAPE: dict[str, Any] = dict(
    target_epsilon=8.0, delta=1e-5, dataset_size=54000, batch_size=256, epochs=5.0, sensitivity=1.0, sampling="poisson"
)
PLAN_VALUES: dict[str, list[Any]] = {
    "target_epsilon": [NAN, INF, -1, 0, "8", None],
    "delta": [NAN, 0, 1, -1e-5, 2.0],
    "dataset_size": [0, 1, -5, 2.5, NAN, None, 10**12],
    "batch_size": [0, -1, 2.5, 10**6, None],
    "epochs": [NAN, INF, -1, 0, 1e9],
    "steps": [0, -1, 2.5, 10**9],
    "mechanism": ["laplace", None, "SKELLAM"],
    "sampling": ["bogus", None],
    "sensitivity": [NAN, INF, -1, 0],
    "lattice_resolution": [NAN, 0, 1e9],
    "dimension": [0, -1, 2.5],
}


def plan_cases(folder: Path) -> list[Case]:
    """``plan`` with hostile numbers, another device's profile and damaged calibration files."""
    from trainers.api import plan

    made: dict[str, Any] = {}

    def files() -> tuple[Path, Path, Any]:
        if not made:
            made["files"] = camera_files(folder / "camera")
        return made["files"]

    def numbers(key: str, value: Any) -> Callable[[], str]:
        def run() -> str:
            profile, _, calibration = files()
            mechanism = "skellam" if key in ("lattice_resolution", "dimension") else "gaussian"
            extra = {"dimension": 1000} if mechanism == "skellam" and key != "dimension" else {}
            plan(calibration, str(profile), **{**SHAPE, "mechanism": mechanism, **extra, key: value})
            return "silent"

        return run

    def damaged(name: str) -> Callable[[], str]:
        def run() -> str:
            profile, path, _ = files()
            data = json.loads(path.read_text())
            DAMAGES[name](data)
            target = folder / f"{name.replace(' ', '-')}.json"
            target.write_text(json.dumps(copy.deepcopy(data)))
            plan(target, str(profile), **SHAPE, mechanism="gaussian")
            return "silent"

        return run

    def profile_case(profile: Any) -> Callable[[], str]:
        return lambda: (plan(files()[2], profile, **SHAPE, mechanism="gaussian"), "silent")[1]

    def valid() -> str:
        profile, path, _ = files()
        plans = plan(path, str(profile), **SHAPE, mechanism="gaussian")
        return "accepted" if plans else "silent"

    cases: list[Case] = [(f"plan {k}={v!r}", numbers(k, v)) for k, values in PLAN_VALUES.items() for v in values]
    cases += [(f"plan calibration {name}", damaged(name)) for name in DAMAGES]
    cases += [(f"plan profile {p!r}", profile_case(p)) for p in ("opu-sim", "opu-sim-dp", "torch-cpu", 42, "nope")]
    cases.append(("plan its own calibration", valid))
    return cases
