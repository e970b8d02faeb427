"""The private-training option groups of ``opu-hal train`` (privacy, each private method, torchrun,
checkpoints) and the options of ``opu-hal tune``."""

from __future__ import annotations

import argparse

from .argument_kinds import DeprecatedAlias


def add_privacy_arguments(p: argparse.ArgumentParser) -> None:
    """Options every private method reads: target, noise, accounting, sampling, public size."""
    priv = p.add_argument_group("privacy (photonic-dp, dp-dfa, dp-sgd, dp-ulr, dp-mac)")
    priv.add_argument(
        "--target-epsilon",
        type=float,
        default=None,
        help="stop before this epsilon; the noise is planned for it (inverse accounting)",
    )
    priv.add_argument("--delta", type=float, default=None, help="target delta ({per_method})")
    priv.add_argument(
        "--noise-multiplier",
        type=float,
        default=None,
        help="fix the noise multiplier z instead of choosing it for --target-epsilon",
    )
    priv.add_argument(
        "--accounting",
        choices=("rdp", "pld"),
        default=None,
        help="how the ledger becomes (epsilon, delta): rdp (default), or pld: also dp-accounting's "
        "privacy-loss distribution, the smaller epsilon (Poisson-sampled Gaussian runs; about "
        "7%% less noise for dp-sgd at epsilon 3)",
    )
    priv.add_argument(
        "--noise-source",
        choices=("software", "device"),
        default=None,
        help="where privacy noise comes from: software, or the device's photo-electron counts (dp-dfa) ({per_method})",
    )
    priv.add_argument(
        "--sampling",
        choices=("poisson", "fixed", "rejection"),
        default=None,
        help="minibatch sampling: dp-sgd poisson or fixed, dp-dfa fixed (paper 002) or poisson "
        "(add/remove, software or device noise), dp-ulr rejection (paper 004) "
        "({per_method})",
    )
    priv.add_argument(
        "--public-dataset-size",
        type=int,
        default=None,
        metavar="N",
        help="add/remove adjacency (dp-sgd poisson, dp-ulr, dp-mac): the training-set size the "
        "sampling rate, steps and record use, declared public; the true size is then not "
        "published (default: the true size, published and stated as public)",
    )


def add_method_arguments(p: argparse.ArgumentParser) -> None:
    """One group per private method: its clips, noise and options."""
    sgd = p.add_argument_group("dp-sgd")
    sgd.add_argument("--clip-norm", type=float, default=None, help="per-example clip C ({per_method})")

    dfa = p.add_argument_group("dp-dfa")
    dfa.add_argument("--beta", type=float, default=None, help="feedback spectral norm ({per_method})")
    dfa.add_argument("--tau-e", type=float, default=None, help="error clip ({per_method})")
    dfa.add_argument("--tau-h", type=float, default=None, help="activation clip ({per_method})")
    dfa.add_argument(
        "--lattice-resolution",
        type=float,
        default=None,
        help="device noise: the update's L2 sensitivity in lattice units, gamma*Delta = k "
        "(per-coordinate analysis; the Poisson mean per count is (z k)^2/2) or k*sqrt(d) "
        "(worst-case; noise x(k+1)/k) ({per_method})",
    )
    dfa.add_argument(
        "--rounding-analysis",
        choices=("per-coordinate", "worst-case"),
        default=None,
        help="device noise: account randomized rounding per coordinate or by its worst case "
        "(k+1)*sqrt(d) ({per_method})",
    )

    photonic = p.add_argument_group("photonic-dp")
    photonic.add_argument("--tau-h-min", type=float, default=None, help="lower activation clip ({per_method})")
    photonic.add_argument("--tau-h-max", type=float, default=None, help="upper activation clip ({per_method})")
    photonic.add_argument("--tau-b", type=float, default=None, help="scale of B e ({per_method})")
    photonic.add_argument(
        "--software-noise-std",
        dest="software_noise_std",
        type=float,
        default=None,
        help="on a torch profile: software noise std, output units (paper 000 Table 1 sigma)",
    )
    photonic.add_argument(
        "--sigma",
        dest="software_noise_std",
        type=float,
        default=None,
        action=DeprecatedAlias,
        new="--software-noise-std",
        help="deprecated alias of --software-noise-std",
    )
    photonic.add_argument(
        "--no-clip-pixels",
        dest="clip_pixels",
        action="store_false",
        default=None,
        help="clip the hidden neurons only, not the pixels (paper 000's text: 'the neurons'); "
        "the paper's eq. 17 claim is then not recorded",
    )
    photonic.add_argument(
        "--ternarize",
        action="store_true",
        default=None,
        help="on a torch profile: ternarize the error (paper 000's TDFA row)",
    )

    options = p.add_argument_group("dp-ulr and dp-mac")
    options.add_argument(
        "--opt",
        dest="extra",
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="method option, repeatable (dp-ulr: mode, repeats, forward_std, min_batch, "
        "remediation; dp-mac: bounds, t_b, t_b_max, t_z, t_w, z_steps, z_lr, sigma_hist, "
        "bins, pretrain_epochs)",
    )


def add_distributed_arguments(p: argparse.ArgumentParser) -> None:
    """torchrun runs: how the noise is added across ranks."""
    dd = p.add_argument_group("distributed (torchrun --nproc_per_node=W -m opu_hal train ...)")
    dd.add_argument(
        "--distributed-noise",
        choices=("single", "shares"),
        default=None,
        help="private methods on W ranks: rank 0 adds the noise once (single, default; every rank "
        "sees the un-noised sum) or every rank adds a share (shares: Skellam/Gaussian)",
    )
    dd.add_argument(
        "--colluders",
        type=int,
        default=None,
        metavar="T",
        help="--distributed-noise shares: ranks that may collude; the W - T honest shares alone carry "
        "the accounted noise (default 0)",
    )


def add_checkpoint_arguments(p: argparse.ArgumentParser) -> None:
    """Checkpoints and resume."""
    ck = p.add_argument_group("checkpoints")
    ck.add_argument("--checkpoint", default=None, help="checkpoint path (written atomically; secret)")
    ck.add_argument("--checkpoint-every", type=int, default=None, help="steps between checkpoints (default 50)")
    ck.add_argument("--resume", action="store_true", default=None, help="continue from --checkpoint")


#: What ``opu-hal tune`` publishes (``--release``).
RELEASES = ("final-run", "best-candidate")


def add_tune_arguments(p: argparse.ArgumentParser) -> None:
    """``opu-hal tune``'s own options (the search space and the distribution of the number of runs)."""
    group = p.add_argument_group("tuning (Papernot-Steinke 2022)")
    group.add_argument(
        "--space",
        action="append",
        required=True,
        metavar="KEY=V1,V2,...",
        help="search space, repeatable; KEY one of {tunable}",
    )
    group.add_argument(
        "--k-distribution",
        choices=("negative-binomial", "poisson", "fixed"),
        default="negative-binomial",
        help="law of K, the number of candidate runs: secret, truncated negative binomial (Theorem 2, "
        "default) or Poisson (Theorem 6; K = 0 selects nothing); or fixed and public (K = "
        "--mean-runs candidates composed: the duration may be public)",
    )
    group.add_argument(
        "--mean-runs",
        type=float,
        default=10.0,
        help="E[K], the mean number of candidate runs (default 10; Poisson: >= 1; fixed: an integer)",
    )
    group.add_argument(
        "--total-epsilon",
        type=float,
        default=None,
        metavar="EPSILON",
        help="plan each run's noise so that the tuning and the final run together (the tuning "
        "alone with --release best-candidate) spend at most this epsilon at --delta (instead of "
        "--target-epsilon per run)",
    )
    group.add_argument(
        "--release",
        choices=RELEASES,
        default="final-run",
        help="what the tuning publishes: a final run retrained with the selected settings "
        "(final-run, default), or the selected candidate's own run, Algorithm 1's output "
        "(best-candidate: no final run; the total is the tuning's epsilon alone)",
    )
    group.add_argument(
        "--slots",
        type=int,
        default=None,
        metavar="M",
        help="candidate runs trained whatever K is (K is drawn conditioned on K <= M, so the "
        "tuning's duration does not tell K); default: the fewest whose truncation fits --delta",
    )
    group.add_argument(
        "--eta",
        type=float,
        default=1.0,
        help="shape of the truncated negative binomial, > -1 (1: geometric, default; 0: logarithmic)",
    )
