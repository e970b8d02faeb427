"""``opu-hal audit``: the audit's command on opu_hal's parser (the ``opu_hal.commands`` entry point
``audit``), taking the same run options as ``train``."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import Any

from opu_hal.runtime.output import add_json_option, print_json

from ..cli.arguments import add_train_arguments
from ..cli.file_checks import check_named_files
from ..core.errors import TrainingConfigError


def check_audit_arguments(args: argparse.Namespace) -> None:
    """Refuse, before the audit trains anything, a confidence outside (0, 1) and outputs that could
    not be written afterwards (an unwritable path, a plot extension matplotlib cannot write)."""
    from opu_hal.runtime.paths import plot_format_reason, same_file

    from ..run.loop import check_output_path

    if not (math.isfinite(args.confidence) and 0 < args.confidence < 1):
        raise TrainingConfigError(f"--confidence must be in (0, 1) (exclusive), got {args.confidence}")
    for path, option in ((args.out, "--out"), (args.plot, "--plot")):
        if path:
            check_output_path(path, option)
    if args.plot:
        reason = plot_format_reason(args.plot)
        if reason is not None:
            raise TrainingConfigError(f"--plot {args.plot}: {reason}")
        if args.out and same_file(args.plot, args.out):
            raise TrainingConfigError(f"--plot {args.plot} is the --out path; give the plot its own file")


def _cmd_audit(args: argparse.Namespace) -> int:
    check_named_files(args)  # before torch: a mistyped path is answered at once
    from ..cli import config_from_args
    from ..run.output import write_json
    from .black_box import audit_black_box
    from .plot import plot_audit
    from .white_box import audit_multi_run, audit_white_box

    check_audit_arguments(args)
    config = config_from_args(args)
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    if args.inspect:
        return _inspect(args, config, log)
    if args.runs is not None:
        if args.threat_model != "white-box":
            raise TrainingConfigError("--runs (the multi-run audit) is white-box; drop --threat-model black-box")
        result = audit_multi_run(config, runs=args.runs, confidence=args.confidence, log=log)
        detail = f"{result['runs']} runs, half with the canary"
    else:
        audit = audit_black_box if args.threat_model == "black-box" else audit_white_box
        modes = {} if args.threat_model == "black-box" else {"canary_mode": args.canary_mode}
        result = audit(config, canaries=args.canaries, confidence=args.confidence, log=log, **modes)
        detail = f"{result['correct']}/{result['guesses']} guesses right, {result['canaries']} canaries"
    if args.out:
        write_json(args.out, result)
    if args.plot:
        plot_audit(result, args.plot)
    if args.json:
        print_json(result)
    else:
        report_audit(result, detail, args)
    return 0


def report_audit(result: dict, detail: str, args: argparse.Namespace) -> None:
    """The audit's outcome in words: claimed epsilon against the empirical lower bound, and findings."""
    print(
        f"audit of {result['method']} ({result['noise_source']} noise, {result['threat_model']}): claimed epsilon "
        f"{result['claimed_epsilon']:.4g} at delta {result['delta']:g}; empirical lower bound "
        f"{result['epsilon_lower_bound']:.4g} at {result['confidence']:.0%} confidence "
        f"({detail}, {result['time_s']:.0f} s)"
    )
    if "gdp_epsilon_estimate" in result:
        print(
            f"Gaussian-DP estimate (Nasr et al. 2023, {result['gdp_assumption']}): epsilon "
            f"{result['gdp_epsilon_estimate']:.4g}"
        )
    if "measured_sensitivity" in result:
        print(
            f"sensitivity: measured {result['measured_sensitivity']:.4g}, claimed {result['claimed_sensitivity']:.4g}"
        )
    if result.get("findings"):
        print(f"FLAGGED: {'; '.join(result['findings'])}")
    if args.out:
        print(f"audit record: {args.out}")
    if args.plot:
        print(f"plot: {args.plot}")


def _inspect(args: argparse.Namespace, config: Any, log: Callable[[str], None]) -> int:
    """``--inspect``: the mechanism inspector's table (:mod:`trainers.audit.inspector`)."""
    from ..run.output import write_json
    from .inspector import inspect

    report = inspect(config, log=log)
    if args.out:
        write_json(args.out, report.to_dict())
    if args.json:
        print_json(report.to_dict())
        return 0
    print(
        f"inspection of {report.method} ({report.noise_source} noise): {len(report.rows)} checks, family-wise "
        f"false-alarm rate {report.alpha:g} (each test at {report.per_test_level:.2g}), {report.time_s:.0f} s"
    )
    print(report.table())
    for reason in report.not_inspected:
        print(f"not inspected: {reason}")
    print(f"FLAGGED: {'; '.join(report.to_dict()['findings'])}" if report.flagged else "no mechanism flagged")
    if args.out:
        print(f"inspection record: {args.out}")
    return 0


def register_audit_commands(sub: argparse._SubParsersAction) -> None:
    p = parser = sub.add_parser(
        "audit",
        help="empirical lower bound on epsilon: one-run audit (white-box: dp-dfa, dp-sgd; "
        "black-box: every private method)",
    )
    add_train_arguments(p)
    p = p.add_argument_group("audit")
    p.add_argument(
        "--threat-model",
        choices=("white-box", "black-box"),
        default="white-box",
        help="white-box: canaries on the released update; black-box: input canaries scored by the "
        "final model's loss (default white-box)",
    )
    p.add_argument("--canaries", type=int, default=1000, help="canaries (default 1000)")
    p.add_argument(
        "--canary-mode",
        choices=("pipeline", "update"),
        default="pipeline",
        help="white-box: pipeline (default): canaries are training rows drawn by the run's sampler and "
        "summed by its centring; update: canaries join the update at the claimed rate",
    )
    p.add_argument(
        "--runs",
        type=int,
        default=None,
        help="multi-run audit instead: this many trainings with one canary (small models)",
    )
    p.add_argument("--confidence", type=float, default=0.95, help="confidence of the bound (default 0.95)")
    p.add_argument("--plot", default=None, help="PNG of the canaries' scores")
    p.add_argument(
        "--inspect",
        action="store_true",
        help="instead: the mechanism inspector, measuring each mechanism's noise law, sampling rate, "
        "sensitivity and draws against what the ledger charges",
    )
    add_json_option(parser, "print the audit report as JSON (progress and logs go to stderr)")
    parser.set_defaults(func=_cmd_audit)
