"""How the ranks' work on one global batch becomes one step.

Non-private methods: each rank sets ``.grad`` to the mean over its shard; :func:`synchronize_step`
all-reduces ``n_r * grad_r`` (one flat buffer, the batch statistics appended) and divides by the
global batch size, so every rank applies the gradient a single process would.

Private methods (a single noisy release per step, :meth:`trainers.methods.base.Method.release`):
each rank clips its own examples and forms its partial clipped update ``u_r``; the linear query is
``u = sum_r u_r``. Two ways to noise it, both adding exactly the accounted noise once:

- :class:`NoiseAdderRelease` (``--distributed-noise single``): ``u`` is all-reduced, rank 0 applies
  the method's own release (software Gaussian or device Skellam, from its secure generator or its
  device), and broadcasts the result. Every rank sees the un-noised ``u``: all ranks are trusted.
- :class:`SkellamShareRelease` / :class:`GaussianShareRelease` (``--distributed-noise shares``,
  ``--colluders t``): each rank rounds its own ``gamma u_r`` randomly and adds Skellam counts of
  Poisson mean ``lambda / (W - t)`` from its own device (or Gaussian noise of variance
  ``sigma^2 / (W - t)``), then the noisy shares are summed. Sums of independent Skellam (Gaussian)
  variables are Skellam (Gaussian) with the summed parameter, so the ``W - t`` honest shares alone
  carry the accounted ``lambda`` (``sigma^2``); the colluders' shares are extra noise. Only one
  rank's rounding depends on the example that differs between neighbours, so the rounding analysis
  of :mod:`opu_hal.privacy.rounding` holds as for one process (the other roundings are independent
  post-processing). Agarwal, Kairouz and Liu 2021, section 4 (distributed Skellam).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from opu_hal import Device
from opu_hal.privacy.mechanisms import as_release, on_lattice, skellam_counts
from opu_hal.privacy.skellam import SkellamLattice
from opu_hal.randomness.secure_random import SecureGenerator

from ..methods.base import StepOutput
from .context import SingleProcess

Publish = Callable[[torch.Tensor], torch.Tensor]


def synchronize_step(ranks: SingleProcess, model: torch.nn.Module, output: StepOutput, private: bool) -> StepOutput:
    """Make every rank hold the global step: the batch statistics summed, and (non-private
    methods) the gradient of the whole batch. Private methods' gradients were already summed
    and noised by the release (:class:`NoiseAdderRelease` and the shares)."""
    if not ranks.distributed:
        return output
    params = [p for p in model.parameters()] if not private else []
    n_local = output.count
    parts = [(p.grad if p.grad is not None else torch.zeros_like(p)).flatten() * n_local for p in params]
    if n_local == 0:  # an empty shard: a method may divide by zero; it contributes nothing
        parts = [torch.zeros_like(part) for part in parts]
    device = next(model.parameters()).device
    stats = torch.tensor([output.loss_sum, output.correct, output.count], dtype=torch.float64, device=device)
    flat = torch.cat([*[part.double() for part in parts], stats])
    ranks.all_reduce_sum(flat, "summing the ranks' gradients and batch statistics")
    loss_sum, correct, count = flat[-3:].tolist()
    if params:
        total = torch.zeros(0, dtype=flat.dtype, device=device) if count == 0 else flat[:-3] / count
        offset = 0
        for p in params:
            if count:
                p.grad = total[offset : offset + p.numel()].view_as(p).to(p.dtype)
            offset += p.numel()
    return StepOutput(loss_sum, int(round(correct)), int(round(count)), output.noise, output.privacy_event)


class NoiseAdderRelease:
    """Sum the ranks' partial updates; rank 0 publishes (adds the noise) once; every rank gets it."""

    mode = "single"

    def __init__(self, ranks: SingleProcess) -> None:
        self.ranks = ranks

    def __call__(self, u: torch.Tensor, publish: Publish) -> torch.Tensor:
        total = self.ranks.all_reduce_sum(u.detach().clone().contiguous(), "summing the clipped updates")
        released = publish(total).contiguous() if self.ranks.is_main else torch.empty_like(total)
        return self.ranks.broadcast(released, 0, "broadcasting the noisy release")


def honest_ranks(world_size: int, colluders: int) -> int:
    """``W - t``: the ranks whose noise shares stay secret; at least one."""
    if not 0 <= colluders < world_size:
        raise ValueError(f"--colluders must be in [0, {world_size - 1}] for {world_size} ranks, got {colluders}")
    return world_size - colluders


class ShareRelease:
    """Noise added as shares by every rank, the ``W - t`` honest ones (``t`` colluders) carrying the
    accounted noise together."""

    mode = "shares"

    def __init__(self, ranks: SingleProcess, method: Any, colluders: int) -> None:
        self.ranks, self.method = ranks, method
        self.honest = honest_ranks(ranks.world_size, colluders)


class SkellamShareRelease(ShareRelease):
    """Each rank: ``R(gamma u_r) + K_r`` with ``K_r`` Skellam counts of mean ``lambda / (W - t)``
    from its own device; the shares are summed and scaled back by ``1 / gamma``. The method (dp-dfa
    with device noise) is read at each call: its lattice, accounted mean, device and secure generator."""

    @property
    def share_mean(self) -> float:
        return self.method.mechanism.poisson_mean / self.honest

    def __call__(self, u: torch.Tensor, publish: Publish) -> torch.Tensor:
        lattice: SkellamLattice = self.method.lattice
        device: Device = self.method.context.device
        share_mean = self.share_mean
        share, draw = on_lattice(
            u,
            lattice.gamma,
            self.method.generator,
            lambda n: skellam_counts(device, n, share_mean, f"rank {self.ranks.rank}: device"),
        )
        self.method.mechanism.distribution = draw.distribution
        total = self.ranks.all_reduce_sum(
            torch.from_numpy(share), "summing the Skellam noise shares"
        )  # integers: exact
        return as_release(total.numpy(), lattice.gamma, u)


class GaussianShareRelease(ShareRelease):
    """Each rank adds Gaussian noise of variance ``sigma^2 / (W - t)`` (``sigma`` the method's
    ``noise_std``) from its own secure generator; the shares are summed."""

    @property
    def share_std(self) -> float:
        return float(self.method.noise_std) / self.honest**0.5

    def __call__(self, u: torch.Tensor, publish: Publish) -> torch.Tensor:
        generator: SecureGenerator = self.method.generator
        noise = generator.standard_normal(u.numel(), u.device).to(dtype=u.dtype).view_as(u)
        share = torch.add(u.detach(), noise, alpha=self.share_std).contiguous()
        return self.ranks.all_reduce_sum(share, "summing the Gaussian noise shares")
