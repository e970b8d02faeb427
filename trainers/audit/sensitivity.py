"""The measured sensitivity: the largest change one example makes to a method's pre-noise update,
through its own code (see :mod:`trainers.audit`)."""

from __future__ import annotations

from typing import Any

import torch

from opu_hal.randomness.secure_random import SecureGenerator

from ..core.data import Split
from ..core.errors import TrainingConfigError
from ..methods.base import GaussianNoiseMethod
from ..run.loop import Trainer


def probe_inputs(
    train: Split, n_real: int, n_random: int, scales: tuple[float, ...], generator: SecureGenerator
) -> torch.Tensor:
    """Adversarial probe inputs: real training inputs at every scale in ``scales`` (large scales
    make the input and gradient clips bind), uniform and Gaussian random inputs at those scales,
    and the zero input."""
    real = train.x[:n_real].detach().cpu().float()
    features = real.shape[1]
    uniform = torch.from_numpy(generator.uniform(n_random * features).reshape(n_random, features)).float()
    normal = generator.standard_normal(n_random * features).view(n_random, features).float().cpu()
    batches = [s * part for s in scales for part in (real, uniform, normal)]
    return torch.cat([*batches, torch.zeros(1, features)])


def _max_pairwise_distance(updates: torch.Tensor) -> float:
    """``max_{i,j} ||U_i - U_j||`` over the rows (float64 Gram matrix of the centred rows)."""
    centred = (updates - updates[0]).double()
    gram = centred @ centred.T
    norms = gram.diagonal()
    squared = norms[:, None] + norms[None, :] - 2 * gram
    return float(squared.clamp_min(0).max().sqrt())


def _pair_changes(
    method: Any, bases: torch.Tensor, added: torch.Tensor, labels: torch.Tensor, captured: list[torch.Tensor]
) -> tuple[float, float]:
    """Add/remove on two-example batches, ``a`` from ``bases`` and ``b`` from ``added``: the largest
    change ``||U({a, b}) - U({a})||``, and the largest departure from additivity
    ``||U({a, b}) - U({a}) - U({b}) + U({})||``. The Poisson subsampled Gaussian charges one
    per-example term per example: a clip of the batch's sum (rather than of each example) is not
    additive, and can move the update by up to twice the bound."""

    def update(rows: list[tuple[torch.Tensor, int]]) -> torch.Tensor:
        x = torch.stack([r[0] for r in rows]) if rows else bases[:0]
        y = torch.tensor([r[1] for r in rows], dtype=labels.dtype, device=labels.device)
        method.compute_gradients(x, y)
        return captured[-1].double()

    empty = update([])
    label_b = [int(labels[(j + 1) % len(labels)]) for j in range(len(added))]  # another label than a's
    singles_b = [update([(added[j], label_b[j])]) for j in range(len(added))]
    largest = departure = 0.0
    for i in range(len(bases)):
        alone = update([(bases[i], int(labels[i]))])
        for j in range(len(added)):
            both = update([(bases[i], int(labels[i])), (added[j], label_b[j])])
            largest = max(largest, float((both - alone).norm()))
            departure = max(departure, float((both - alone - singles_b[j] + empty).norm()))
    captured.clear()
    return largest, departure


def measure_sensitivity(
    trainer: Trainer,
    n_real: int = 8,
    n_random: int = 4,
    base_size: int = 4,
    scales: tuple[float, ...] = (1.0, 10.0, 100.0),
    pairs: int = 0,
) -> dict[str, Any]:
    """The largest change one example makes to the pre-noise update, measured through
    ``trainer.method.compute_gradients`` with ``release_update`` replaced by a capture of ``u``.

    Each probe input (:func:`probe_inputs`) is tried with every label (wrong labels included).
    Replace-one: batch ``base + probe_i`` for every probe, max over pairs ``||U_i - U_j||``.
    Add/remove: ``||U(base + probe_i) - U(base)||``. ``base`` is the first ``base_size`` training
    examples. Under add/remove, ``pairs > 0`` also tries the two-example batches of the first
    ``pairs`` probes at the second-largest scale with those at the largest (:func:`_pair_changes`). The model, its gradients and the
    optimizer are restored (the method's secure generator may have advanced; nothing it releases
    depends on that). The measured value is a
    lower bound on the true sensitivity at the model's initial state, so canaries of this size are
    within what the claim must cover."""
    method, split = trainer.method, trainer.train_split
    if not isinstance(method, GaussianNoiseMethod):
        raise TrainingConfigError(
            f"measuring the sensitivity needs a method that claims one (a Gaussian-noise "
            f"method such as dp-dfa or dp-sgd), got {method.name!r}"
        )
    neighboring = getattr(method, "neighboring", "add_remove")
    params = list(trainer.model.parameters())
    saved_state = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    saved_grads = [None if p.grad is None else p.grad.detach().clone() for p in params]
    inputs = probe_inputs(split, n_real, n_random, scales, SecureGenerator()).to(split.x.device)
    classes = int(trainer.data.n_classes)
    base_x, base_y = split.x[:base_size], split.y[:base_size]
    captured: list[torch.Tensor] = []
    pair_change, additivity = 0.0, None

    def capture(u: torch.Tensor) -> torch.Tensor:
        captured.append(u.detach().flatten().cpu().float().clone())
        return u

    method.intercept_release(capture)
    try:
        with torch.enable_grad():
            if neighboring != "replace_one":
                method.compute_gradients(base_x, base_y)
            for x in inputs:
                for label in range(classes):
                    y = torch.tensor([label], device=split.y.device, dtype=split.y.dtype)
                    method.compute_gradients(torch.cat([base_x, x[None]]), torch.cat([base_y, y]))
            updates = torch.stack(captured)
            if pairs and neighboring != "replace_one" and len(scales) >= 2:
                block = n_real + 2 * n_random  # the probes of one scale; the zero input comes last
                bases, added = inputs[-1 - 2 * block : -1 - block][:pairs], inputs[-1 - block : -1][:pairs]
                labels = (torch.arange(len(bases)) % classes).to(split.y.device, split.y.dtype)
                pair_change, additivity = _pair_changes(method, bases, added, labels, captured)
    finally:
        method.intercept_release(None)
        for p, g in zip(params, saved_grads):
            p.grad = g
    if neighboring == "replace_one":
        measured = _max_pairwise_distance(updates)
    else:
        measured = float((updates[1:] - updates[0]).double().norm(dim=1).max())
        if pairs:
            measured = max(measured, pair_change)
    for key, value in trainer.model.state_dict().items():
        if not torch.equal(value, saved_state[key]):
            raise RuntimeError(f"measuring the sensitivity changed the model ({key}); the audit would be void")
    claimed = float(method.sensitivity)
    return {
        "measured_sensitivity": measured,
        "claimed_sensitivity": claimed,
        "neighboring": neighboring,
        "sensitivity_probes": len(updates),
        "sensitivity_exceeds_claim": measured > claimed * (1 + 1e-6),
        **({} if additivity is None else {"additivity_departure": additivity}),
    }


# -- canaries ----------------------------------------------------------------------------------
