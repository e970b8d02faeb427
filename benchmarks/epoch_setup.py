"""The shared set-up of the one-method epoch benchmarks (:mod:`benchmarks.dp_dfa_epoch`,
:mod:`benchmarks.dp_sgd_overheads`): their common options, and the data with the method warmed up."""

from __future__ import annotations

import argparse

from benchmarks.data import fashion_or_random
from benchmarks.private_vs_opacus import ours
from trainers.core.data import Dataset


def epoch_parser(doc: str, rounds: int) -> argparse.ArgumentParser:
    """A parser with ``--rounds`` (default ``rounds``), ``--train`` and ``--epsilon``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--train", type=int, default=54_000)
    parser.add_argument("--epsilon", type=float, default=8.0)
    return parser


def warmed_data(method: str, args: argparse.Namespace) -> Dataset:
    """The first ``args.train`` FashionMNIST examples, after one epoch of ``method`` (compiles the noise
    kernels, fills the caches)."""
    data = fashion_or_random(args.train)
    ours(method, data, 1, args.epsilon)
    return data
