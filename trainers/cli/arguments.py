"""The run options of ``opu-hal train`` (and ``tune``, ``audit``), grouped by the methods they apply to.

Building these parsers imports no method, no torch: the method list, each method's defaults and the
tunable settings are read only when a help text is printed (:class:`MethodHelpFormatter`) or a
command runs, so ``opu-hal --help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import MISSING, fields
from typing import Any


def _integers(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes comma-separated integers like 512,512, got {text!r}") from None


def per_method_defaults(dest: str) -> str:
    """``dest``'s default for each method, grouped by value: ``default per method: 256 (bp, dfa); 128
    (dp-sgd)``, or ``default 15`` when every method has the same."""
    from ..run.config import TrainConfig
    from ..methods import METHODS

    base = {f.name: f.default for f in fields(TrainConfig) if f.default is not MISSING}
    groups: dict[str, list[str]] = {}
    for name, cls in METHODS.items():
        value = cls.default_profile if dest == "profile" else cls.defaults.get(dest, base.get(dest))
        if isinstance(value, tuple):
            value = ",".join(str(v) for v in value) or '""'
        groups.setdefault("none" if value is None else str(value), []).append(name)
    if len(groups) == 1:
        return f"default {next(iter(groups))}"
    return "default per method: " + "; ".join(f"{value} ({', '.join(names)})" for value, names in groups.items())


def _method_names() -> str:
    from ..methods import method_names

    return ", ".join(method_names())


def _tunable() -> str:
    from .tune import TUNABLE

    return ", ".join(sorted(TUNABLE))


class MethodHelpFormatter(argparse.HelpFormatter):
    """Fills ``{per_method}``, ``{methods}`` and ``{tunable}`` in help texts when help is printed."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "{per_method}" in text:
            text = text.replace("{per_method}", per_method_defaults(action.dest))
        if "{methods}" in text:
            text = text.replace("{methods}", _method_names())
        if "{tunable}" in text:
            text = text.replace("{tunable}", _tunable())
        return text


class MethodChoice(argparse.Action):
    """``--method``: one of the registered methods, checked when parsed (the registry is read then)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, value: Any,
                 option_string: str | None = None) -> None:
        from ..methods import method_names

        if value not in method_names():
            parser.error(f"argument --method: invalid choice: {value!r} (choose from {', '.join(method_names())})")
        setattr(namespace, self.dest, value)


class DeprecatedAlias(argparse.Action):
    """An old option name: stores like the new one and warns on stderr."""

    def __init__(self, option_strings: list[str], dest: str, new: str = "", **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, value: Any,
                 option_string: str | None = None) -> None:
        print(f"warning: {option_string} is deprecated and will be removed; use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, value)


def add_train_arguments(p: argparse.ArgumentParser) -> None:
    """The run options, in groups: run, model, device, privacy and one group per private method."""
    p.formatter_class = MethodHelpFormatter
    for add_group in (_add_run_arguments, _add_model_arguments, _add_device_arguments, _add_privacy_arguments,
                      _add_method_arguments, _add_distributed_arguments, _add_checkpoint_arguments):
        add_group(p)


def _add_run_arguments(p: argparse.ArgumentParser) -> None:
    """Options every method reads: method, data, optimization, inputs, output."""
    run = p.add_argument_group("run (every method)")
    run.add_argument("--method", required=True, action=MethodChoice, metavar="METHOD",
                     help="training method: {methods}")
    run.add_argument("--dataset", default="fashion-mnist", choices=("fashion-mnist", "mnist", "digits"),
                     help="data set (default fashion-mnist)")
    run.add_argument("--data-dir", default=None, help="folder of IDX files (default: $OPU_HAL_DATA_DIR or the "
                     "Debian package's /usr/share/datasets/fashion-mnist)")
    run.add_argument("--epochs", type=int, default=None, help="epochs ({per_method})")
    run.add_argument("--batch-size", type=int, default=None, help="batch size ({per_method})")
    run.add_argument("--optimizer", choices=("sgd", "adam"), default=None, help="optimizer ({per_method})")
    run.add_argument("--lr", type=float, default=None, help="learning rate ({per_method})")
    run.add_argument("--momentum", type=float, default=None, help="SGD momentum ({per_method})")
    run.add_argument("--lr-schedule", choices=("constant", "cosine"), default=None,
                     help="learning rate over the planned steps: constant (default) or cosine decay to 0 "
                          "(post-processing, no privacy cost)")
    run.add_argument("--weight-average", type=float, default=None, metavar="DECAY",
                     help="evaluate an exponential moving average of the weights with this decay in (0, 1) "
                          "(default 0: off; post-processing, no privacy cost)")
    run.add_argument("--seed", type=int, default=None,
                     help="seed of the model's initialization and the public randomness (never of privacy noise)")
    run.add_argument("--inputs", choices=("unit", "centered", "standardized"), default=None,
                     help="pixel scaling: [0,1], [-1,1], or standardized ({per_method})")
    run.add_argument("--features", choices=("pixels", "scatter"), default=None,
                     help="pixels, or ScatterNet features of them (a fixed wavelet transform, no privacy "
                          "cost; cached under $OPU_HAL_CACHE or ~/.cache/opu-hal; default pixels)")
    run.add_argument("--center-features", action="store_true", default=None,
                     help="subtract the training features' mean (--features scatter); a private run releases "
                          "it by the Gaussian mechanism and charges it to the ledger before training")
    run.add_argument("--centering-noise", type=float, default=None, metavar="Z",
                     help="noise multiplier of that release, in [1, 10000] (default 20: about 1%% of an "
                          "epsilon-3 budget)")
    run.add_argument("--train-limit", type=int, default=None, help="use only the first N training examples")
    run.add_argument("--n-classes", type=int, default=None, metavar="C",
                     help="the model's output width, public (default: the dataset's declared number of classes; "
                          "never read from the private training labels); labels outside [0, C) are refused")
    run.add_argument("--validation-fraction", type=float, default=None, metavar="F",
                     help="hold out this fraction of the training images for validation, in [0, 1) (default 0.1); "
                          "0 trains a final run on all of them once settings are picked")
    run.add_argument("--no-alignment", dest="alignment", action="store_false", default=None,
                     help="skip the per-epoch gradient alignment")
    run.add_argument("--out", default=None, help="write the result record (JSON) here")
    run.add_argument("--quiet", action="store_true", help="no progress bar")


def _add_model_arguments(p: argparse.ArgumentParser) -> None:
    """The network: MLP or CNN, widths, activation."""
    model = p.add_argument_group("model")
    model.add_argument("--model", choices=("mlp", "cnn"), default=None,
                       help="mlp (default), or cnn: --hidden are 3x3 conv channels, 2x2 pooling, a linear head "
                            "(bp, dp-sgd, and dp-dfa as paper 002's hybrid BP/DFA network)")
    model.add_argument("--hidden", type=_integers, default=None,
                       help='hidden widths, "" for none (a linear model: bp, dp-sgd) ({per_method})')
    model.add_argument("--activation", choices=("tanh", "sigmoid", "relu", "gelu", "softplus"), default=None,
                       help="activation ({per_method})")
    model.add_argument("--conv-strides", type=_integers, default=None,
                       help="--model cnn: one stride per conv block, e.g. 2,1 (strided convs, no pooling)")
    model.add_argument("--head-hidden", type=_integers, default=None,
                       help="--model cnn: hidden widths of the linear head, e.g. 32 (default none)")


def _add_device_arguments(p: argparse.ArgumentParser) -> None:
    """The device: profile, calibration, operating point, compute device."""
    device = p.add_argument_group("device")
    device.add_argument("--profile", default=None, help="device profile name or path ({per_method})")
    device.add_argument("--calibration", default=None,
                        help="calibration file (opu-hal calibrate), relative to the working directory; replaces "
                             "the profile's calibration key")
    device.add_argument("--temperature-c", type=float, default=None, help="simulated OPU sensor temperature, C")
    device.add_argument("--threshold", type=float, default=None,
                        help="tdfa, pdfa: ternarization threshold t ({per_method})")
    device.add_argument("--compute", choices=("auto", "cpu", "cuda"), default=None,
                        help="where model, data, feedback and noise live: auto = CUDA when present (default)")


def _add_privacy_arguments(p: argparse.ArgumentParser) -> None:
    """Options every private method reads: target, noise, accounting, sampling, public size."""
    priv = p.add_argument_group("privacy (photonic-dp, dp-dfa, dp-sgd, dp-ulr, dp-mac)")
    priv.add_argument("--target-epsilon", type=float, default=None,
                      help="stop before this epsilon; the noise is planned for it (inverse accounting)")
    priv.add_argument("--delta", type=float, default=None, help="target delta ({per_method})")
    priv.add_argument("--noise-multiplier", type=float, default=None,
                      help="fix the noise multiplier z instead of choosing it for --target-epsilon")
    priv.add_argument("--accounting", choices=("rdp", "pld"), default=None,
                      help="how the ledger becomes (epsilon, delta): rdp (default), or pld: also dp-accounting's "
                           "privacy-loss distribution, the smaller epsilon (Poisson-sampled Gaussian runs; about "
                           "7%% less noise for dp-sgd at epsilon 3)")
    priv.add_argument("--noise-source", choices=("software", "device"), default=None,
                      help="where privacy noise comes from: software, or the device's photo-electron counts "
                           "(dp-dfa) ({per_method})")
    priv.add_argument("--sampling", choices=("poisson", "fixed", "rejection"), default=None,
                      help="minibatch sampling: dp-sgd poisson or fixed, dp-dfa fixed (paper 002) or poisson "
                           "(add/remove, software noise), dp-ulr rejection (paper 004) "
                           "({per_method})")
    priv.add_argument("--public-dataset-size", type=int, default=None, metavar="N",
                      help="add/remove adjacency (dp-sgd poisson, dp-ulr, dp-mac): the training-set size the "
                           "sampling rate, steps and record use, declared public; the true size is then not "
                           "published (default: the true size, published and stated as public)")


def _add_method_arguments(p: argparse.ArgumentParser) -> None:
    """One group per private method: its clips, noise and options."""
    sgd = p.add_argument_group("dp-sgd")
    sgd.add_argument("--clip-norm", type=float, default=None, help="per-example clip C ({per_method})")

    dfa = p.add_argument_group("dp-dfa")
    dfa.add_argument("--beta", type=float, default=None, help="feedback spectral norm ({per_method})")
    dfa.add_argument("--tau-e", type=float, default=None, help="error clip ({per_method})")
    dfa.add_argument("--tau-h", type=float, default=None, help="activation clip ({per_method})")
    dfa.add_argument("--lattice-resolution", type=float, default=None,
                     help="device noise: the update's L2 sensitivity in lattice units, gamma*Delta = k "
                          "(per-coordinate analysis; the Poisson mean per count is (z k)^2/2) or k*sqrt(d) "
                          "(worst-case; noise x(k+1)/k) ({per_method})")
    dfa.add_argument("--rounding-analysis", choices=("per-coordinate", "worst-case"), default=None,
                     help="device noise: account randomized rounding per coordinate or by its worst case "
                          "(k+1)*sqrt(d) ({per_method})")

    photonic = p.add_argument_group("photonic-dp")
    photonic.add_argument("--tau-h-min", type=float, default=None, help="lower activation clip ({per_method})")
    photonic.add_argument("--tau-h-max", type=float, default=None, help="upper activation clip ({per_method})")
    photonic.add_argument("--tau-b", type=float, default=None, help="scale of B e ({per_method})")
    photonic.add_argument("--software-noise-std", dest="software_noise_std", type=float, default=None,
                          help="on a torch profile: software noise std, output units (paper 000 Table 1 sigma)")
    photonic.add_argument("--sigma", dest="software_noise_std", type=float, default=None, action=DeprecatedAlias,
                          new="--software-noise-std", help="deprecated alias of --software-noise-std")
    photonic.add_argument("--no-clip-pixels", dest="clip_pixels", action="store_false", default=None,
                          help="clip the hidden neurons only, not the pixels (paper 000's text: 'the neurons'); "
                               "the paper's eq. 17 claim is then not recorded")
    photonic.add_argument("--ternarize", action="store_true", default=None,
                          help="on a torch profile: ternarize the error (paper 000's TDFA row)")

    options = p.add_argument_group("dp-ulr and dp-mac")
    options.add_argument("--opt", dest="extra", action="append", default=None, metavar="KEY=VALUE",
                         help="method option, repeatable (dp-ulr: mode, repeats, forward_std, min_batch, "
                              "remediation; dp-mac: bounds, t_b, t_b_max, t_z, t_w, z_steps, z_lr, sigma_hist, "
                              "bins, pretrain_epochs)")


def _add_distributed_arguments(p: argparse.ArgumentParser) -> None:
    """torchrun runs: how the noise is added across ranks."""
    dd = p.add_argument_group("distributed (torchrun --nproc_per_node=W -m opu_hal train ...)")
    dd.add_argument("--distributed-noise", choices=("single", "shares"), default=None,
                    help="private methods on W ranks: rank 0 adds the noise once (single, default; every rank "
                         "sees the un-noised sum) or every rank adds a share (shares: Skellam/Gaussian)")
    dd.add_argument("--colluders", type=int, default=None, metavar="T",
                    help="--distributed-noise shares: ranks that may collude; the W - T honest shares alone carry "
                         "the accounted noise (default 0)")


def _add_checkpoint_arguments(p: argparse.ArgumentParser) -> None:
    """Checkpoints and resume."""
    ck = p.add_argument_group("checkpoints")
    ck.add_argument("--checkpoint", default=None, help="checkpoint path (written atomically; secret)")
    ck.add_argument("--checkpoint-every", type=int, default=None, help="steps between checkpoints (default 50)")
    ck.add_argument("--resume", action="store_true", default=None, help="continue from --checkpoint")


def add_tune_arguments(p: argparse.ArgumentParser) -> None:
    """``opu-hal tune``'s own options (the search space and the distribution of the number of runs)."""
    group = p.add_argument_group("tuning (Papernot-Steinke 2022)")
    group.add_argument("--space", action="append", required=True, metavar="KEY=V1,V2,...",
                       help="search space, repeatable; KEY one of {tunable}")
    group.add_argument("--k-distribution", choices=("negative-binomial", "poisson", "fixed"),
                       default="negative-binomial",
                       help="law of K, the number of candidate runs: secret, truncated negative binomial (Theorem 2, "
                            "default) or Poisson (Theorem 6; K = 0 selects nothing); or fixed and public (K = "
                            "--mean-runs candidates composed: the duration may be public)")
    group.add_argument("--mean-runs", type=float, default=10.0,
                       help="E[K], the mean number of candidate runs (default 10; Poisson: >= 1; fixed: an integer)")
    group.add_argument("--total-epsilon", type=float, default=None, metavar="EPSILON",
                       help="plan each run's noise so that the tuning and the final run together spend at most "
                            "this epsilon at --delta (instead of --target-epsilon per run)")
    group.add_argument("--slots", type=int, default=None, metavar="M",
                       help="candidate runs trained whatever K is (K is drawn conditioned on K <= M, so the "
                            "tuning's duration does not tell K); default: the fewest whose truncation fits --delta")
    group.add_argument("--eta", type=float, default=1.0,
                       help="shape of the truncated negative binomial, > -1 (1: geometric, default; 0: logarithmic)")
