"""Audit report (issue 27): the white-box one-run audit of dp-dfa and dp-sgd at claimed epsilon 2,
and the black-box audit of the other private methods, at small sizes. Run from the repository root:

    python -m scripts.audit.report [--canaries 90000] [--out results/audit/report.json]

White-box (:func:`trainers.audit.audit_white_box`): sampling rate 1 (batch = the 200 training
examples of the synthetic ``clusters`` set), 4 steps, the noise chosen by the accountant for
``--target-epsilon 2`` at ``--delta``; an MLP 20-300-300-10 (99,610 parameters) so that the canaries
have distinct coordinates. Reported: the Steinke et al. (2023) bound (assumption-free, primary), the
Gaussian-DP estimate of Nasr et al. (2023) (assumes a Gaussian trade-off), their ratios to the
claim, and the measured over the claimed sensitivity. Black-box (:func:`trainers.audit.audit_black_box`):
photonic-dp, dp-ulr, dp-mac with input canaries, as in tests/test_audit.py.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from tests.training_helpers import clusters
from trainers.audit import audit_black_box, audit_white_box
from trainers.run.config import TrainConfig

WHITE_BOX = [("dp-dfa", {}), ("dp-dfa", {"noise_source": "device"}), ("dp-sgd", {})]
BLACK_BOX = [("photonic-dp", {}), ("dp-ulr", {"target_epsilon": 2.0}), ("dp-mac", {"target_epsilon": 2.0})]


def white_box(method: str, extra: dict[str, Any], canaries: int, delta: float) -> dict[str, Any]:
    """One white-box audit at claimed epsilon 2 (module docstring)."""
    config = TrainConfig.for_method(
        method, epochs=4, batch_size=200, hidden=(300, 300), alignment=False, target_epsilon=2.0, delta=delta, **extra
    )
    return audit_white_box(config, canaries=canaries, data=clusters(n_train=200, n_test=100))


def black_box(method: str, extra: dict[str, Any], canaries: int) -> dict[str, Any]:
    """One black-box audit at the size of the tests."""
    config = TrainConfig.for_method(method, epochs=4, batch_size=100, hidden=(16, 12), alignment=False, **extra)
    return audit_black_box(config, canaries=canaries, guess_counts=(10, 25, 50, 100), data=clusters(n_train=1200))


def summary(result: dict[str, Any]) -> dict[str, Any]:
    """The report's row: everything but the canaries' scores."""
    claimed = result["claimed_epsilon"]
    row = {k: v for k, v in result.items() if k != "scores"}
    finite = math.isfinite(claimed) and claimed > 0
    row["ratio"] = result["epsilon_lower_bound"] / claimed if finite else None
    row["gdp_ratio"] = result["gdp_epsilon_estimate"] / claimed if finite else None
    return row


def table(rows: list[dict[str, Any]]) -> str:
    """A fixed-width table of the rows."""
    head = (
        f"{'method':<24}{'threat model':<12}{'claimed eps':>12}{'Steinke LB':>12}{'GDP est.':>10}"
        f"{'ratio':>8}{'GDP ratio':>10}{'meas/claim sens':>17}{'time s':>8}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        sens = f"{r['measured_sensitivity'] / r['claimed_sensitivity']:.3f}" if "measured_sensitivity" in r else "-"
        fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
        lines.append(
            f"{r['method'] + ' (' + r['noise_source'] + ')':<24}{r['threat_model'].split(',')[0]:<12}"
            f"{r['claimed_epsilon']:>12.3f}{r['epsilon_lower_bound']:>12.3f}{r['gdp_epsilon_estimate']:>10.3f}"
            f"{fmt(r['ratio']):>8}{fmt(r['gdp_ratio']):>10}{sens:>17}{r['time_s']:>8.1f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--canaries", type=int, default=90_000, help="white-box canaries (default 90000)")
    parser.add_argument("--black-box-canaries", type=int, default=200, help="black-box canaries (default 200)")
    parser.add_argument("--delta", type=float, default=1e-6, help="delta of the white-box claims (default 1e-6)")
    parser.add_argument("--out", default="results/audit/report.json")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    rows = [summary(white_box(m, extra, args.canaries, args.delta)) for m, extra in WHITE_BOX]
    rows += [summary(black_box(m, extra, args.black_box_canaries)) for m, extra in BLACK_BOX]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    report = {
        "command": "python -m scripts.audit.report " + " ".join(sys.argv[1:] if argv is None else argv),
        "rows": rows,
        "time_s": time.perf_counter() - began,
    }
    Path(args.out).write_text(json.dumps(report, indent=1, default=str))
    print(table(rows))
    print(f"report: {args.out} ({report['time_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
