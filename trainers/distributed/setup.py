"""What a rank does once, before training: refuse what cannot be distributed, pick its profile,
share the sampler's secret, make the model identical everywhere, and route private releases.

Supported: bp, dfa, tdfa, pdfa (gradients averaged), dp-dfa and dp-sgd (one noisy release per
step, :mod:`.aggregation`). Each other method's registration names why it is not
(``MethodSpec.distributed_refusal``, :mod:`trainers.methods.registry`).
"""

from __future__ import annotations

from typing import Any

import torch

from opu_hal.randomness.secure_random import SecureGenerator, new_secret_key

from ..core.errors import TrainingConfigError
from ..core.sampling import default_sampler_stream
from ..methods.base import Method
from ..methods.registry import get_spec
from .aggregation import GaussianShareRelease, NoiseAdderRelease, SkellamShareRelease, honest_ranks
from .context import SingleProcess

#: ``--distributed-noise``: ``single`` (rank 0 adds the noise once) or ``shares`` (every rank a share).
NOISE_MODES = ("single", "shares")


def check_method(name: str, ranks: SingleProcess) -> None:
    """Refuse, naming why, a method this package does not distribute."""
    refusal = get_spec(name).distributed_refusal
    if ranks.distributed and refusal is not None:
        raise TrainingConfigError(
            f"method {name!r} cannot run on {ranks.world_size} ranks: {refusal}. Run it in one process "
            "(plain python -m opu_hal train, or torchrun --nproc_per_node=1)"
        )


def rank_profile(profile: str, ranks: SingleProcess) -> str:
    """This rank's profile from ``--profile``: one name for every rank, or a comma-separated list
    with one name per rank (e.g. one OPU per rank)."""
    if "," not in profile:
        return profile
    names = [part.strip() for part in profile.split(",")]
    if len(names) != ranks.world_size or not all(names):
        raise TrainingConfigError(
            f"--profile {profile!r} names {len(names)} profile(s); give one for every rank or one per rank "
            f"({ranks.world_size} ranks)"
        )
    return names[ranks.rank]


def shared_secret(ranks: SingleProcess) -> str:
    """The sampler's secret key: drawn by rank 0 from OS entropy (256 bits) and broadcast once, so
    every rank draws the same global batches from one secret sampler (never from a seed)."""
    key = new_secret_key() if ranks.is_main else None
    return ranks.broadcast_object(key, 0, "sharing the sampler's secret key")  # type: ignore[return-value]


def shared_stream(ranks: SingleProcess) -> str:
    """The private sampler's keystream (:data:`trainers.core.sampling.SAMPLER_STREAMS`): rank 0's, so that every rank draws
    the same batches (a rank that cannot draw it refuses by name rather than draw others)."""
    return ranks.broadcast_object(default_sampler_stream(), 0, "sharing the sampler's keystream")


def broadcast_model(ranks: SingleProcess, model: torch.nn.Module) -> None:
    """Every rank starts from rank 0's parameters (and buffers)."""
    for tensor in [*model.parameters(), *model.buffers()]:
        ranks.broadcast(tensor.data, 0, "broadcasting the model")


def route_releases(ranks: SingleProcess, config: Any, method: Method) -> None:
    """Install the release aggregator of ``--distributed-noise`` on a private method (after its
    noise multiplier is chosen). Shares draw their noise on every rank: each rank's generator gets
    a fresh secret, and the steps cannot be replayed on resume (they are charged)."""
    if not ranks.distributed or not method.private:
        return
    if not method.single_release:
        raise TrainingConfigError(f"method {method.name!r} makes no single noisy release per step to distribute")
    mode, colluders = config.distributed_noise, config.colluders
    if mode == "single":
        if colluders:
            raise TrainingConfigError(
                "--colluders applies to --distributed-noise shares; with single, rank 0 adds "
                "all the noise and every rank sees the un-noised sum"
            )
        method.aggregate_releases(NoiseAdderRelease(ranks))
        return
    try:
        honest_ranks(ranks.world_size, colluders)
    except ValueError as exc:
        raise TrainingConfigError(str(exc)) from None
    fresh_generator(method)
    lattice = getattr(method, "lattice", None)
    share = (
        GaussianShareRelease(ranks, method, colluders)
        if lattice is None
        else SkellamShareRelease(ranks, method, colluders)
    )
    method.aggregate_releases(share)
    method.replayable = False  # every rank's share noise is its own secret: it cannot be drawn again


def fresh_generator(method: Method) -> None:
    """Give a share-drawing method's secure generator a new secret (after a checkpoint load, every
    rank would otherwise hold rank 0's and draw identical shares)."""
    if hasattr(method, "generator"):
        method.generator = SecureGenerator()


def describe(ranks: SingleProcess, config: Any, method: Method) -> dict[str, Any]:
    """The record's public description of the run's ranks and noise split."""
    info: dict[str, Any] = {"world_size": ranks.world_size, "backend": ranks.backend}
    if method.private:
        info["noise"] = config.distributed_noise
        if config.distributed_noise == "shares":
            info["colluders_tolerated"] = config.colluders
            info["noise_applied_over_accounted_variance"] = ranks.world_size / (ranks.world_size - config.colluders)
    return info
