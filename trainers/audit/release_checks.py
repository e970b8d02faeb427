"""Run-level checks of the inspector (see :mod:`trainers.audit.inspector`): the number of noise
draws a real training epoch makes against the ledger's events, noise replayed by a second run of
the same settings, and the centring release."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from ..core import centering as centering_module
from ..run import dataset as run_dataset
from ..run.loop import Trainer
from .noise_checks import Finding, continuity, correlation, gaussian_fit, variance_shortfall

_MISSING = object()


@contextmanager
def _counting(owner: Any, name: str, tally: list[int], size: Callable[[Any, tuple, dict], int]) -> Iterator[None]:
    """Count into ``tally`` the values ``owner.name`` draws while the block runs (an observation
    wrapper on the instance or module, removed on leaving)."""
    original = getattr(owner, name)
    own = vars(owner).get(name, _MISSING)  # an attribute of the object itself, else its class's

    def counted(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        tally[0] += size(result, args, kwargs)
        return result

    setattr(owner, name, counted)
    try:
        yield
    finally:
        if own is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, own)


def count_noise_draws(trainer: Trainer) -> Finding:
    """Train ``trainer`` one epoch through the real loop, counting the noise values drawn (the
    method's secure normals, the device's counts, the keyed normals of dp-mac / dp-ulr) against
    ``events x d`` (one release of the ``d`` parameters per ledger event)."""
    method, tally = trainer.method, [0]
    dimension = sum(p.numel() for p in trainer.model.parameters())
    numel = lambda result, args, kwargs: int(getattr(result, "numel", lambda: np.size(result))())  # noqa: E731
    counts = lambda result, args, kwargs: int(result.counts.numel())  # noqa: E731
    watched = []
    generator = getattr(method, "generator", None)
    if generator is not None and hasattr(generator, "standard_normal"):
        watched.append((generator, "standard_normal", numel))
    if trainer.device is not None:
        watched += [
            (trainer.device, name, counts)
            for name in ("draw_privacy_counts", "draw_digitized_counts")
            if hasattr(trainer.device, name)
        ]
    module = sys.modules[type(method).__module__]
    if hasattr(module, "torch_normal"):
        watched.append((module, "torch_normal", numel))
    before = trainer.accountant.steps if trainer.accountant is not None else 0
    with _all(watched, tally):
        trainer.run(max_epochs=1)
    events = (trainer.accountant.steps if trainer.accountant is not None else 0) - before
    measured = tally[0] / max(events, 1)
    return Finding(
        "releases (noise draws per ledger event)",
        "noise values drawn per charged step",
        measured,
        float(dimension),
        f"rule: equal, over {events} charged step(s)",
        None,
        events == 0 or not np.isclose(measured, dimension),
    )


@contextmanager
def _all(watched: list, tally: list[int]) -> Iterator[None]:
    if not watched:
        yield
        return
    (owner, name, size), rest = watched[0], watched[1:]
    with _counting(owner, name, tally, size), _all(rest, tally):
        yield


def replay_finding(first: np.ndarray, second: np.ndarray) -> Finding:
    """Correlation between two runs' first noise draws at the same settings and seed: noise drawn
    from a secret generator is independent across runs; noise seeded from ``--seed`` repeats."""
    return correlation(
        "per-step noise", "correlation with a second run's noise (same settings, same --seed)", first, second
    )


def check_centering(trainer: Trainer, draws: int = 8) -> list[Finding]:
    """The centring release (:mod:`trainers.core.centering`), driven through the function the loop
    calls on a zero training set: its noise on the sum against ``z R s`` (std and law), and the
    clipped sum's measured sensitivity (one huge example added) against the radius ``R s``."""
    centring = trainer.centering
    if centring is None or centring.event is None:
        return []
    config, x = trainer.config, trainer.train_split.x
    size = run_dataset.public_size(config, len(x))
    neighboring = trainer.method.neighboring_for(config)
    zeros = torch.zeros_like(x).cpu()
    sums = [
        run_dataset.release_for_run(zeros, True, config.centering_noise, size, neighboring).mean.double() * size
        for _ in range(draws)
    ]
    noise = torch.stack(sums).numpy()
    factor = 2.0 if neighboring == "replace_one" else 1.0
    charged = float(centring.event.noise_multiplier) * centring.radius * factor
    name = "centring release (Gaussian)"
    rows = [variance_shortfall(name, noise, charged), gaussian_fit(name, noise, charged), continuity(name, noise)]
    base = torch.zeros(4, x.shape[1], dtype=torch.float64)
    huge = torch.full((1, x.shape[1]), 100.0 * centring.radius, dtype=torch.float64)
    moved = float(
        (
            centering_module.clipped_sum(torch.cat([base, huge]), centring.radius)
            - centering_module.clipped_sum(base, centring.radius)
        ).norm()
    )
    rows.append(
        Finding(
            name,
            "sensitivity of the clipped sum (add/remove one)",
            moved,
            centring.radius,
            "rule: measured <= charged",
            None,
            moved > centring.radius * (1 + 1e-6),
        )
    )
    return rows
