"""The planted-bug table of issue 44, item 3: each bug of ``tests/test_audit_zoo.py`` planted in the
real code, then the existing one-run white-box audit (before: 1,000 canaries, its ``flagged``) and
the mechanism inspector (after: ``trainers.audit.inspect``, the rows it flags); and the inspector's
false-alarm rate on sound runs of every private method. Run from the repository root:

    python -m scripts.audit.zoo_table [--canaries 1000] [--sound-repeats 3] [--out results/audit/zoo.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from tests import test_audit_zoo as zoo
from tests.test_scattering import tiny_images_dataset
from tests.training_helpers import clusters
from trainers.audit import audit_white_box, inspect
from trainers.run.config import TrainConfig


def _cases() -> list[tuple[str, Callable, TrainConfig, Any]]:
    cases = [(name, plant, zoo._config(method, **changes), clusters(**zoo.DATA))
             for name, plant, method, changes, _, _ in zoo.ZOO]
    cases.append(("centring without noise", zoo._centring_without_noise, zoo._centring_config(),
                  tiny_images_dataset()))
    return cases


def _one(name: str, plant: Callable, config: TrainConfig, data: Any, canaries: int) -> dict[str, Any]:
    with pytest.MonkeyPatch.context() as patch:
        plant(patch)
        audit = audit_white_box(config, canaries=canaries, data=data)
        began = time.perf_counter()
        report = inspect(config, data=data)
        seconds = time.perf_counter() - began
    return {"bug": name, "method": config.method, "noise_source": config.noise_source,
            "audit_epsilon_lower_bound": audit["epsilon_lower_bound"], "claimed_epsilon": audit["claimed_epsilon"],
            "measured_sensitivity": audit["measured_sensitivity"], "audit_flagged": audit["flagged"],
            "inspector_flagged": report.flagged, "inspector_findings": report.to_dict()["findings"],
            "inspector_s": seconds}


def _false_alarms(repeats: int) -> dict[str, Any]:
    runs = flagged = 0
    worst: list[str] = []
    for method, changes in zoo.SOUND:
        for _ in range(repeats):
            report = inspect(zoo._config(method, **changes), data=clusters(**zoo.DATA))
            runs, flagged = runs + 1, flagged + report.flagged
            worst += report.to_dict()["findings"]
    return {"sound_runs": runs, "flagged": flagged, "findings": worst}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--canaries", type=int, default=1000)
    parser.add_argument("--sound-repeats", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    rows = [_one(*case, canaries=args.canaries) for case in _cases()]
    print("| planted | audit lower bound / claim | audit flagged | inspector flagged | inspector finding | s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        finding = r["inspector_findings"][0] if r["inspector_findings"] else ""
        print(f"| {r['bug']} | {r['audit_epsilon_lower_bound']:.3g} / {r['claimed_epsilon']:.3g} | "
              f"{'yes' if r['audit_flagged'] else 'no'} | {'yes' if r['inspector_flagged'] else 'no'} | {finding} | "
              f"{r['inspector_s']:.0f} |")
    alarms = _false_alarms(args.sound_repeats)
    print(f"false alarms: {alarms['flagged']} of {alarms['sound_runs']} sound inspections {alarms['findings']}")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"rows": rows, "false_alarms": alarms}, indent=1))


if __name__ == "__main__":
    main()
