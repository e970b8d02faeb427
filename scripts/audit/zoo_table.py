"""The planted-bug table of issue 44: each bug of ``tests/test_audit_zoo.py`` planted in the real
code, then the one-run white-box audit in its two canary modes (before: ``update``, canaries planted
in the update at the claimed rate; after: ``pipeline``, canaries as training rows through the run's
sampler and centring, plus the likelihood-ratio score), each with ``--canaries``, and the mechanism
inspector (``trainers.audit.inspect``, the rows it flags); and the false-alarm rates on sound runs
of every private method (the inspector's, and the pipeline audit's on the white-box methods). Run
from the repository root:

    python -m scripts.audit.zoo_table [--canaries 1000] [--sound-repeats 3] [--no-inspector]
                                      [--out results/audit/zoo.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import test_audit_zoo as zoo
from tests.test_scattering import tiny_images_dataset
from tests.training_helpers import clusters
from trainers.audit import audit_white_box, inspect, white_box_methods
from trainers.run.config import TrainConfig


def _cases() -> list[tuple[str, Callable, TrainConfig, Any]]:
    cases = [
        (name, plant, zoo._config(method, **changes), clusters(**zoo.DATA))
        for name, plant, method, changes, _, _ in zoo.ZOO
    ]
    cases.append(("centring without noise", zoo._centring_without_noise, zoo._centring_config(), tiny_images_dataset()))
    return cases


def _audits(config: TrainConfig, data: Any, canaries: int) -> dict[str, Any]:
    """The white-box audit in both canary modes: bound, claim, flag, best score kind, seconds."""
    row: dict[str, Any] = {}
    for mode in ("update", "pipeline"):
        audit = audit_white_box(config, canaries=canaries, data=data, canary_mode=mode)
        row.update(
            {
                f"{mode}_epsilon_lower_bound": audit["epsilon_lower_bound"],
                f"{mode}_claimed_epsilon": audit["claimed_epsilon"],
                f"{mode}_flagged": audit["flagged"],
                f"{mode}_score_kind": audit["score_kind"],
                f"{mode}_by_score_kind": audit["by_score_kind"],
                f"{mode}_findings": audit["findings"],
                f"{mode}_s": audit["time_s"],
            }
        )
    return row


def _one(name: str, plant: Callable, config: TrainConfig, data: Any, canaries: int, inspector: bool) -> dict[str, Any]:
    with pytest.MonkeyPatch.context() as patch:
        if config.features == "scatter":
            patch.setenv("OPU_HAL_CACHE", tempfile.mkdtemp(prefix="zoo-table-"))
        plant(patch)
        row = {
            "bug": name,
            "method": config.method,
            "noise_source": config.noise_source,
            **_audits(config, data, canaries),
        }
        if inspector:
            began = time.perf_counter()
            report = inspect(config, data=data)
            row.update(
                {
                    "inspector_flagged": report.flagged,
                    "inspector_findings": report.to_dict()["findings"],
                    "inspector_s": time.perf_counter() - began,
                }
            )
    return row


def _false_alarms(repeats: int) -> dict[str, Any]:
    runs = flagged = 0
    worst: list[str] = []
    for method, changes in zoo.SOUND:
        for _ in range(repeats):
            report = inspect(zoo._config(method, **changes), data=clusters(**zoo.DATA))
            runs, flagged = runs + 1, flagged + report.flagged
            worst += report.to_dict()["findings"]
    return {"sound_runs": runs, "flagged": flagged, "findings": worst}


def _pipeline_false_alarms(repeats: int, canaries: int) -> dict[str, Any]:
    """Sound runs of the white-box methods audited with pipeline canaries: how many were flagged."""
    runs = flagged = 0
    worst: list[Any] = []
    for method, changes in zoo.SOUND:
        if method not in white_box_methods() or changes.get("profile"):
            continue
        for _ in range(repeats):
            audit = audit_white_box(zoo._config(method, **changes), canaries=canaries, data=clusters(**zoo.DATA))
            runs, flagged = runs + 1, flagged + audit["flagged"]
            worst += (
                [(method, changes, audit["epsilon_lower_bound"], audit["claimed_epsilon"])] if audit["flagged"] else []
            )
    return {"sound_runs": runs, "flagged": flagged, "findings": worst}


def _print_table(rows: list[dict[str, Any]], inspector: bool) -> None:
    def audit(r: dict[str, Any], mode: str) -> str:
        return (
            f"{r[mode + '_epsilon_lower_bound']:.3g} / {r[mode + '_claimed_epsilon']:.3g} "
            f"({r[mode + '_score_kind']}) {'**flagged**' if r[mode + '_flagged'] else 'no'}"
        )

    head = "| planted | before: update canaries, bound / claim | after: pipeline canaries + LR, bound / claim |"
    print(head + (" inspector | inspector finding |" if inspector else ""))
    print("|---|---|---|" + ("---|---|" if inspector else ""))
    for r in rows:
        line = f"| {r['bug']} | {audit(r, 'update')} | {audit(r, 'pipeline')} |"
        if inspector:
            finding = r["inspector_findings"][0] if r["inspector_findings"] else ""
            line += f" {'yes' if r['inspector_flagged'] else 'no'} | {finding} |"
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--canaries", type=int, default=1000)
    parser.add_argument("--sound-repeats", type=int, default=3)
    parser.add_argument("--no-inspector", action="store_true", help="audits only (skip the inspector's columns)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    inspector = not args.no_inspector
    rows = [_one(*case, canaries=args.canaries, inspector=inspector) for case in _cases()]
    _print_table(rows, inspector)
    result: dict[str, Any] = {"rows": rows, "canaries": args.canaries}
    result["pipeline_false_alarms"] = _pipeline_false_alarms(args.sound_repeats, args.canaries)
    alarms = result["pipeline_false_alarms"]
    print(
        f"pipeline audit false alarms: {alarms['flagged']} of {alarms['sound_runs']} sound audits {alarms['findings']}"
    )
    if inspector:
        result["false_alarms"] = alarms = _false_alarms(args.sound_repeats)
        print(
            f"inspector false alarms: {alarms['flagged']} of {alarms['sound_runs']} sound inspections "
            f"{alarms['findings']}"
        )
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
