"""``opu-hal train`` and ``opu-hal plot``: the trainers' commands on opu_hal's parser."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from opu_hal import cli as hal_cli

from .config import TrainConfig
from .methods import method_names
from .core.data import DatasetError
from .core.errors import TrainingConfigError


def _integers(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes comma-separated integers like 512,512, got {text!r}") from None


def add_train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--method", required=True, choices=method_names())
    p.add_argument("--profile", default=None, help="device profile name or path (default: the method's)")
    p.add_argument("--dataset", default="fashion-mnist", choices=("fashion-mnist", "mnist", "digits"))
    p.add_argument("--data-dir", default=None, help="folder of IDX files (default: $OPU_HAL_DATA_DIR or the "
                   "Debian package's /usr/share/datasets/fashion-mnist)")
    p.add_argument("--epochs", type=int, default=None, help="default 15")
    p.add_argument("--batch-size", type=int, default=None, help="default 256 (dp-dfa/dp-sgd: 128)")
    p.add_argument("--hidden", type=_integers, default=None, help="hidden widths, default 512,512; \"\" for none (a linear model: bp, dp-sgd)")
    p.add_argument("--activation", choices=("tanh", "sigmoid", "relu", "gelu", "softplus"), default=None)
    p.add_argument("--optimizer", choices=("sgd", "adam"), default=None)
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--momentum", type=float, default=None)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--threshold", type=float, default=None, help="ternarization threshold t (default 0.15)")
    p.add_argument("--model", choices=("mlp", "cnn"), default=None,
                   help="mlp (default), or cnn: --hidden are 3x3 conv channels, 2x2 pooling, a linear head "
                        "(bp, dp-sgd, and dp-dfa as paper 002's hybrid BP/DFA network; pixels or --features scatter)")
    p.add_argument("--conv-strides", type=_integers, default=None,
                   help="--model cnn: one stride per conv block, e.g. 2,1 (strided convs, no pooling)")
    p.add_argument("--head-hidden", type=_integers, default=None,
                   help="--model cnn: hidden widths of the linear head, e.g. 32 (default none)")
    p.add_argument("--features", choices=("pixels", "scatter"), default=None,
                   help="pixels, or ScatterNet features of them (a fixed wavelet transform, no privacy "
                        "cost; cached under $OPU_HAL_CACHE or ~/.cache/opu-hal)")
    p.add_argument("--inputs", choices=("unit", "centered", "standardized"), default=None,
                   help="pixel scaling: [0,1], [-1,1], or standardized by the training split (default; "
                        "private methods: unit)")
    p.add_argument("--train-limit", type=int, default=None, help="use only the first N training examples")
    p.add_argument("--no-alignment", dest="alignment", action="store_false", default=None,
                   help="skip the per-epoch gradient alignment")
    priv = p.add_argument_group("privacy (photonic-dp, dp-dfa, dp-sgd)")
    priv.add_argument("--target-epsilon", type=float, default=None)
    priv.add_argument("--delta", type=float, default=None, help="default 1e-5")
    priv.add_argument("--noise-multiplier", type=float, default=None,
                      help="fix the noise multiplier instead of choosing it for --target-epsilon")
    priv.add_argument("--noise-source", choices=("software", "device"), default=None)
    priv.add_argument("--sampling", choices=("poisson", "fixed", "rejection"), default=None,
                      help="dp-sgd / dp-ulr minibatch sampling (rejection: dp-ulr, paper 004)")
    priv.add_argument("--public-dataset-size", type=int, default=None, metavar="N",
                      help="add/remove adjacency (dp-sgd poisson, dp-ulr, dp-mac): the training-set size the "
                           "sampling rate, steps and record use, declared public; the true size is then not "
                           "published (default: the true size, published and stated as public)")
    priv.add_argument("--opt", dest="extra", action="append", default=None, metavar="KEY=VALUE",
                      help="method option, repeatable (dp-ulr: mode, repeats, forward_std, min_batch, remediation; "
                           "dp-mac: bounds, t_b, t_b_max, t_z, t_w, z_steps, z_lr, sigma_hist, bins, pretrain_epochs)")
    priv.add_argument("--clip-norm", type=float, default=None, help="dp-sgd per-example clip C (default 1)")
    priv.add_argument("--beta", type=float, default=None, help="dp-dfa feedback spectral norm (default 0.9)")
    priv.add_argument("--tau-e", type=float, default=None, help="dp-dfa error clip (default 0.1)")
    priv.add_argument("--tau-h", type=float, default=None, help="dp-dfa activation clip (default 1)")
    priv.add_argument("--tau-h-min", type=float, default=None, help="photonic-dp (default 0)")
    priv.add_argument("--tau-h-max", type=float, default=None, help="photonic-dp (default 1)")
    priv.add_argument("--tau-b", type=float, default=None, help="photonic-dp scale of B e (default 1)")
    priv.add_argument("--software-noise-std", "--sigma", dest="software_noise_std", type=float, default=None,
                      help="photonic-dp on a torch profile: software noise std, output units (paper 000 "
                           "Table 1 sigma; --sigma is its alias)")
    priv.add_argument("--no-clip-pixels", dest="clip_pixels", action="store_false", default=None,
                      help="photonic-dp: clip the hidden neurons only, not the pixels (paper 000's text: "
                           "'the neurons'); the paper's eq. 17 claim is then not recorded")
    priv.add_argument("--ternarize", action="store_true", default=None,
                      help="photonic-dp on a torch profile: ternarize the error (paper 000's TDFA row)")
    priv.add_argument("--lattice-resolution", type=float, default=None,
                      help="dp-dfa device noise: the update's L2 sensitivity in lattice units, gamma*Delta = k "
                           "(per-coordinate analysis; the Poisson mean per count is (z k)^2/2) or k*sqrt(d) "
                           "(worst-case; noise x(k+1)/k) (default 10)")
    priv.add_argument("--rounding-analysis", choices=("per-coordinate", "worst-case"), default=None,
                      help="dp-dfa device noise: account randomized rounding per coordinate (default; "
                           "opu_hal/privacy/rounding.py) or by its worst case (k+1)*sqrt(d)")
    priv.add_argument("--temperature-c", type=float, default=None, help="simulated OPU sensor temperature")
    priv.add_argument("--calibration", default=None,
                      help="calibration file (opu-hal calibrate) to use instead of the profile's calibration key")
    dd = p.add_argument_group("distributed (torchrun --nproc_per_node=W -m opu_hal train ...)")
    dd.add_argument("--distributed-noise", choices=("single", "shares"), default=None,
                    help="private methods on W ranks: rank 0 adds the noise once (single, default; every rank "
                         "sees the un-noised sum) or every rank adds a share (shares: Skellam/Gaussian)")
    dd.add_argument("--colluders", type=int, default=None, metavar="T",
                    help="--distributed-noise shares: ranks that may collude; the W - T honest shares alone carry "
                         "the accounted noise (default 0)")
    ck = p.add_argument_group("checkpoints")
    ck.add_argument("--checkpoint", default=None, help="checkpoint path (written atomically)")
    ck.add_argument("--checkpoint-every", type=int, default=None, help="steps between checkpoints (default 50)")
    ck.add_argument("--resume", action="store_true", default=None, help="continue from --checkpoint")
    p.add_argument("--compute", choices=("auto", "cpu", "cuda"), default=None,
                   help="where model, data, feedback and noise live: auto = CUDA when present (default)")
    p.add_argument("--out", default=None, help="write the result record (JSON) here")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


OPTION_NAMES = ("profile", "dataset", "data_dir", "epochs", "batch_size", "hidden", "activation", "optimizer",
                "lr", "momentum", "seed", "threshold", "ternarize", "clip_pixels", "inputs", "features", "model", "conv_strides", "head_hidden", "train_limit", "alignment", "target_epsilon", "delta",
                "noise_multiplier", "noise_source", "sampling", "public_dataset_size", "clip_norm", "beta", "tau_e", "tau_h",
                "tau_h_min", "tau_h_max", "tau_b", "software_noise_std", "temperature_c", "calibration", "lattice_resolution", "rounding_analysis", "compute", "distributed_noise", "colluders", "checkpoint", "checkpoint_every",
                "resume")


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
    return TrainConfig.for_method(args.method, extra=_extra(getattr(args, "extra", None)),
                                  **{name: getattr(args, name) for name in OPTION_NAMES})


def _cmd_train(args: argparse.Namespace) -> int:
    from .loop import train  # torch-heavy; imported only when training

    try:
        config = config_from_args(args)
        record = train(config, out=args.out, progress=not args.quiet)
    except DatasetError as exc:
        raise TrainingConfigError(str(exc)) from exc
    if os.environ.get("RANK", "0") != "0":  # a torchrun job: rank 0 reports
        return 0
    final = record["final"]
    line = (f"{config.method} on {record['profile']['name'] if record['profile'] else 'no device'}: "
            f"test accuracy {final['test_accuracy']:.4f} after {final['epochs_completed']} epoch(s), "
            f"{final['wall_time_s']:.1f} s")
    if "epsilon" in final:
        line += f"; spent (epsilon {final['epsilon']:.4g}, delta {final['delta']:g})"
    if "camera_seconds" in final:
        line += f"; device noise took {final['camera_frames']} camera frame(s), {final['camera_seconds']:.4g} s"
    print(line)
    privacy = record.get("privacy") or {}
    if privacy.get("mechanism"):
        print(privacy_summary(privacy, record.get("profile")))
    if privacy.get("dataset_size"):
        print(f"training-set size {record['dataset']['train']}: {privacy['dataset_size']}")
    if args.out:
        print(f"result record: {args.out}")
    return 0


def _cmd_tune(args: argparse.Namespace) -> int:
    from .loop import check_output_path, train  # torch-heavy; imported only when training
    from .records import write_json
    from .tune import parse_space, summary, tune
    from opu_hal.privacy.tuning import TruncatedNegativeBinomial

    try:
        config = config_from_args(args)
        if args.out is not None:
            check_output_path(args.out, "--out")
        record = tune(config, parse_space(args.space), TruncatedNegativeBinomial.with_mean(args.mean_runs, args.eta),
                      lambda c: train(c, progress=False, log=lambda message: None))
    except DatasetError as exc:
        raise TrainingConfigError(str(exc)) from exc
    print(summary(record))
    if args.out:
        write_json(args.out, record)
        print(f"tuning record: {args.out}")
    return 0


def privacy_summary(privacy: dict, profile: dict | None) -> str:
    """One line: the mechanism, where its noise came from, the generator, the calibration used."""
    parts = [f"mechanism {privacy['mechanism']}", f"noise source {privacy.get('noise_source', 'software')}"]
    device_noise = privacy.get("device_noise")
    if device_noise and device_noise.get("kind") == "digitized-reads":
        parts.append(f"device {profile['name'] if profile else '?'}: {device_noise.get('reads_per_value')} digitized "
                     f"anchor reads per count at {device_noise.get('gain_e_per_dn')} e-/DN, read mean >= "
                     f"{device_noise['poisson_mean_lower']:.4g} e- (accounted exactly from the read's law)")
    elif device_noise:
        parts.append(f"device {profile['name'] if profile else '?'}: Poisson mean >= {device_noise['poisson_mean_lower']:.4g} "
                     f"e- per count ({device_noise.get('reads_per_value')} anchor reads each)")
        parts.append(f"means from {device_noise.get('mean_source', 'the profile model')}")
        if device_noise.get("camera_seconds") is not None:
            parts.append(f"camera {device_noise['frames']} anchor-only frame(s), "
                         f"{device_noise['camera_seconds']:.4g} s per step")
    if device_noise and device_noise.get("generator"):
        parts.append(f"counts from {device_noise['generator']}")
        parts.append(f"lattice rounding from {privacy.get('generator', '?')}")
    else:
        parts.append(f"generator {privacy.get('generator', '?')}")
    return "privacy: " + "; ".join(parts)


def _cmd_plot(args: argparse.Namespace) -> int:
    from opu_hal.runtime.paths import plot_format_reason

    from .loop import check_output_path
    from .plot import plot_records

    check_output_path(args.out, "--out")
    reason = plot_format_reason(args.out)
    if reason is not None:
        raise TrainingConfigError(f"--out {args.out}: {reason}")
    path = plot_records(args.records, args.out, metric=args.metric, title=args.title)
    print(f"wrote {path}")
    return 0


def _cmd_table(args: argparse.Namespace) -> int:
    from .table import markdown_table

    print(markdown_table(args.records))
    return 0


def register_train_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train an MLP with a DFA-family or private method")
    add_train_arguments(p)
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser("tune", help="private hyperparameter selection, best of a random number of runs "
                                    "(Papernot-Steinke 2022), then a final run; prints the total epsilon")
    add_train_arguments(p)
    from .tune import add_tune_arguments
    add_tune_arguments(p)
    p.set_defaults(func=_cmd_tune)

    p = sub.add_parser("plot", help="accuracy curves (PNG) from result records")
    p.add_argument("records", nargs="+", help="result JSON files written by train --out")
    p.add_argument("--out", required=True, help="PNG path")
    p.add_argument("--metric", default="test_accuracy",
                   help="per-epoch key to plot (test_accuracy, validation_accuracy, train_loss, epsilon, ...)")
    p.add_argument("--title", default=None)
    p.set_defaults(func=_cmd_plot)

    p = sub.add_parser("table", help="markdown table of result records")
    p.add_argument("records", nargs="+", help="result JSON files")
    p.set_defaults(func=_cmd_table)


def main(argv: Sequence[str] | None = None) -> int:
    # The registration function of the imported module, not of ``__main__`` under ``python -m``: it
    # is the same object the ``opu_hal.commands`` entry point loads, so it is registered once.
    from trainers import cli as module

    return hal_cli.main(argv, extra=[module.register_train_commands])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
