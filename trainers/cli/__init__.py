"""``opu-hal train``, ``tune``, ``plot`` and ``table``: the trainers' commands on opu_hal's parser.

The parsers import nothing heavy (:mod:`.arguments`); each command imports what it runs."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from opu_hal import cli as hal_cli
from opu_hal.runtime.output import print_json

from ..core.errors import TrainingConfigError
from .arguments import add_train_arguments, add_tune_arguments
from .file_checks import check_named_files

if TYPE_CHECKING:
    from ..run.config import TrainConfig


OPTION_NAMES = (
    "profile",
    "dataset",
    "data_dir",
    "epochs",
    "batch_size",
    "hidden",
    "activation",
    "optimizer",
    "lr",
    "momentum",
    "lr_schedule",
    "weight_average",
    "seed",
    "threshold",
    "ternarize",
    "clip_pixels",
    "inputs",
    "features",
    "center_features",
    "centering_noise",
    "model",
    "conv_strides",
    "head_hidden",
    "conv_kernel",
    "conv_pool",
    "head_activation",
    "validation_fraction",
    "train_limit",
    "n_classes",
    "alignment",
    "target_epsilon",
    "delta",
    "noise_multiplier",
    "accounting",
    "noise_source",
    "sampling",
    "public_dataset_size",
    "clip_norm",
    "beta",
    "tau_e",
    "tau_h",
    "tau_h_min",
    "tau_h_max",
    "tau_b",
    "software_noise_std",
    "temperature_c",
    "calibration",
    "lattice_resolution",
    "rounding_analysis",
    "compute",
    "distributed_noise",
    "colluders",
    "checkpoint",
    "checkpoint_every",
    "resume",
)


def _extra(pairs: list[str] | None) -> dict[str, str] | None:
    if not pairs:
        return None
    extra: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise TrainingConfigError(f"--opt takes KEY=VALUE, got {pair!r}")
        extra[key.strip()] = value.strip()
    return extra


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The run's :class:`~trainers.run.config.TrainConfig` from the parsed options (the method's defaults
    fill what was not given)."""
    from ..run.config import TrainConfig

    return TrainConfig.for_method(
        args.method, extra=_extra(getattr(args, "extra", None)), **{name: getattr(args, name) for name in OPTION_NAMES}
    )


def _cmd_train(args: argparse.Namespace) -> int:
    check_named_files(args)  # before torch: a mistyped path is answered at once
    from ..core.data import DatasetError
    from ..run.loop import train  # torch-heavy; imported only when training

    try:
        config = config_from_args(args)
        record = train(config, out=args.out, progress=not args.quiet)
    except DatasetError as exc:
        raise TrainingConfigError(str(exc)) from exc
    if os.environ.get("RANK", "0") != "0":  # a torchrun job: rank 0 reports
        return 0
    if args.json:
        print_json(record)
        return 0
    report_run(record)
    if args.out:
        print(f"result record: {args.out}")
    return 0


def report_run(record: dict) -> None:
    """A run's public outcome: accuracy, epsilon, camera time, the mechanism and where its noise came from."""
    final = record["final"]
    line = (
        f"{record['method']} on {record['profile']['name'] if record['profile'] else 'no device'}: "
        f"test accuracy {final['test_accuracy']:.4f} after {final['epochs_completed']} epoch(s), "
        f"{final['wall_time_s']:.1f} s"
    )
    if "epsilon" in final:
        line += f"; spent (epsilon {final['epsilon']:.4g}, delta {final['delta']:g})"
    if "claimed_epsilon" in final:  # a published claim's, never a guarantee
        line += f"; {final['claim']} {final['claimed_epsilon']:.4g} at delta {final['delta']:g}"
    if "camera_seconds" in final:
        line += f"; device noise took {final['camera_frames']} camera frame(s), {final['camera_seconds']:.4g} s"
    print(line)
    privacy = record.get("privacy") or {}
    if privacy.get("mechanism"):
        print(privacy_summary(privacy, record.get("profile")))
    if privacy.get("dataset_size"):
        print(f"training-set size {record['dataset']['train']}: {privacy['dataset_size']}")


def _cmd_tune(args: argparse.Namespace) -> int:
    check_named_files(args)  # before torch: a mistyped path is answered at once
    from ..core.data import DatasetError
    from ..run.disk import write_record
    from ..run.loop import check_output_path, train  # torch-heavy; imported only when training
    from .tune import parse_space, summary, tune
    from .tune_budget import noise_for_total, runs_law

    try:
        if args.total_epsilon is not None:
            if args.target_epsilon is not None or args.noise_multiplier is not None:
                raise TrainingConfigError(
                    "tune: give --total-epsilon (the tuning and the final run together) or "
                    "--target-epsilon / --noise-multiplier (each run), not both"
                )
            args.target_epsilon = args.total_epsilon  # the planning's start: a run alone at the total
        config = config_from_args(args)
        if args.out is not None:
            check_output_path(args.out, "--out")
        space, law = parse_space(args.space), runs_law(args.k_distribution, args.mean_runs, args.eta)
        if args.total_epsilon is not None:
            print(
                "tune: planning each run's noise so that "
                + ("the tuning and the final run spend" if args.release == "final-run" else "the tuning spends")
                + " at most epsilon "
                f"{args.total_epsilon} at delta {config.delta}...",
                file=sys.stderr,
                flush=True,
            )
            config = noise_for_total(config, law, args.total_epsilon, final_run=args.release == "final-run")
        which = (
            f"all {law.mean:g} may be selected (K public)"
            if args.k_distribution == "fixed"
            else f"a secret K of them, mean {law.mean:g}, may be selected"
        )
        print(
            f"tune: training a fixed number of candidate slots ({which}), silently (a line or a progress bar per "
            "candidate would publish K), then "
            + ("the final run" if args.release == "final-run" else "releasing the selected candidate's run"),
            file=sys.stderr,
            flush=True,
        )
        record = tune(
            config,
            space,
            law,
            lambda c: train(c, progress=False, log=lambda message: None),
            slots=args.slots,
            release=args.release,
        )
        if args.total_epsilon is not None:
            record["tuning"]["total_epsilon_target"] = args.total_epsilon
    except DatasetError as exc:
        raise TrainingConfigError(str(exc)) from exc
    if args.out:
        write_record(args.out, record, lambda message: print(message, file=sys.stderr, flush=True))
    if args.json:
        print_json(record)
        return 0
    print(summary(record))
    if record["final_run"] is None:  # K = 0 under --release best-candidate: nothing was selected
        return 0
    print("final run: " if args.release == "final-run" else "the selected candidate's run: ", end="")
    report_run(record["final_run"])
    frames = record["final_run"]["final"].get("camera_frames")
    if frames and "runs" in record["tuning"]:
        print(f"each of the {record['tuning']['runs']} candidate runs took as many camera frames (K is public)")
    elif frames:
        print("the candidate runs' camera time is not published: it would reveal K (Papernot-Steinke)")
    if args.out:
        print(f"tuning record: {args.out}")
    return 0


def privacy_summary(privacy: dict, profile: dict | None) -> str:
    """One line: the mechanism, where its noise came from, the generator, the calibration used."""
    parts = [f"mechanism {privacy['mechanism']}", f"noise source {privacy.get('noise_source', 'software')}"]
    device_noise = privacy.get("device_noise")
    if device_noise and device_noise.get("kind") == "digitized-reads":
        parts.append(
            f"device {profile['name'] if profile else '?'}: {device_noise.get('reads_per_value')} digitized "
            f"anchor reads per count at gain >= {device_noise.get('gain_e_per_dn'):.5g} e-/DN, read mean >= "
            f"{device_noise['poisson_mean_lower']:.4g} e- (accounted exactly from the read's law)"
        )
    elif device_noise:
        parts.append(
            f"device {profile['name'] if profile else '?'}: Poisson mean >= {device_noise['poisson_mean_lower']:.4g} "
            f"e- per count ({device_noise.get('reads_per_value')} anchor reads each)"
        )
        parts.append(f"means from {device_noise.get('mean_source', 'the profile model')}")
        if device_noise.get("camera_seconds") is not None:
            parts.append(
                f"camera {device_noise['frames']} anchor-only frame(s), {device_noise['camera_seconds']:.4g} s per step"
            )
    if device_noise and device_noise.get("generator"):
        parts.append(f"counts from {device_noise['generator']}")
        parts.append(f"lattice rounding from {privacy.get('generator', '?')}")
    else:
        parts.append(f"generator {privacy.get('generator', '?')}")
    return "privacy: " + "; ".join(parts)


def _cmd_plot(args: argparse.Namespace) -> int:
    from opu_hal.runtime.paths import plot_format_reason

    from ..run.loop import check_output_path
    from .plot import plot_records

    if args.out is not None:
        print("warning: plot --out is deprecated and will be removed; use --plot (pictures) ", file=sys.stderr)
        if args.plot is not None:
            raise TrainingConfigError("give --plot, not both --plot and its deprecated alias --out")
    target, option = (args.plot, "--plot") if args.plot is not None else (args.out, "--out")
    if target is None:
        raise TrainingConfigError("plot needs --plot PNG (the picture to write)")
    check_output_path(target, option)
    reason = plot_format_reason(target)
    if reason is not None:
        raise TrainingConfigError(f"{option} {target}: {reason}")
    path = plot_records(args.records, target, metric=args.metric, title=args.title, n_classes=args.classes)
    print(f"wrote {path}")
    return 0


def _cmd_table(args: argparse.Namespace) -> int:
    from .table import markdown_table, table_rows

    if args.json:
        print_json(table_rows(args.records))
    else:
        print(markdown_table(args.records))
    return 0


def register_train_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a model with a DFA-family or private method")
    add_train_arguments(p)
    hal_cli.add_json_option(p, "print the result record as JSON (progress and logs go to stderr)")
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser(
        "tune",
        help="private hyperparameter selection, best of a random number of runs "
        "(Papernot-Steinke 2022), then a final run; prints the total epsilon",
    )
    add_train_arguments(p)
    add_tune_arguments(p)
    hal_cli.add_json_option(p, "print the tuning record as JSON (progress and logs go to stderr)")
    p.set_defaults(func=_cmd_tune)

    p = sub.add_parser("plot", help="accuracy curves (PNG) from result records")
    p.add_argument("records", nargs="+", help="result JSON files written by train --out")
    p.add_argument("--plot", default=None, help="picture to write (PNG, or any format matplotlib writes)")
    p.add_argument("--out", default=None, help="deprecated alias of --plot")
    p.add_argument(
        "--metric",
        default="test_accuracy",
        help="per-epoch key to plot (test_accuracy, validation_accuracy, train_loss, epsilon, ...)",
    )
    p.add_argument("--title", default=None, help="figure title (default: none)")
    p.add_argument(
        "--classes",
        type=int,
        default=None,
        help="classes of the dataset, >= 2, for the chance line of an accuracy (default: from the record)",
    )
    p.set_defaults(func=_cmd_plot)

    p = sub.add_parser("table", help="markdown table of result records")
    p.add_argument("records", nargs="+", help="result JSON files")
    hal_cli.add_json_option(p, "print the rows as JSON instead of a markdown table")
    p.set_defaults(func=_cmd_table)


def main(argv: Sequence[str] | None = None) -> int:
    # The registration function of the imported module, not of ``__main__`` under ``python -m``: it
    # is the same object the ``opu_hal.commands`` entry point loads, so it is registered once.
    from trainers import cli as module

    return hal_cli.main(argv, extra=[module.register_train_commands])
