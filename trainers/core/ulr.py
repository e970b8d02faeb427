"""Likelihood-ratio gradient proxies of DP-ULR (paper 004, section 3.2), for an MLP whose modules
are its linear layers ``v^l = W^l x^l + b^l`` (noise goes on each layer's pre-activation).

- eq. 4: ``g^l(d) = (D_theta v^l)^T z L / sigma^2``. For a linear layer ``D_theta v^T u`` is the
  outer product ``u x~^T`` with ``x~ = [x, 1]`` (Appendix A.4, eq. 26), so a per-example proxy is
  ``e x~^T`` with ``e = mean_k(L_k z_k) / sigma^2`` over the ``K`` repeats (Algorithm 1).
- eq. 7 (privacy controller): ``sigma^2 <= lambda_min(sum_d L0^2 D^T D) / (K C^2 sigma_0^2)``.
  ``D^T D = I_out (x) x~ x~^T``, so the eigenvalues are those of ``M = sum_d L0_d^2 x~_d x~_d^T``
  ((in+1) x (in+1)), each repeated ``out`` times.
- Appendix A.4 (remediation): extra Gaussian noise of covariance
  ``sigma_0^2 C^2 I - diag(Lambda) / K`` in the eigenbasis ``Q`` of the batch covariance.

:func:`clipped_sum` is the single place where per-example contributions are clipped (overall L2
norm ``C`` over all layers) and summed before any noise: a white-box canary goes in there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from opu_hal.randomness.draws import torch_normal
from opu_hal.randomness.keyed_stream import KeyedStream

from .model import MLP, Trace


def with_bias(x: torch.Tensor) -> torch.Tensor:
    """``x~ = [x, 1]`` per row: the bias is the weight of a constant input."""
    return torch.cat([x, torch.ones(x.shape[0], 1, dtype=x.dtype)], dim=1)


def forward_from(model: MLP, layer_index: int, preact: torch.Tensor) -> torch.Tensor:
    """Logits when layer ``layer_index``'s pre-activation is ``preact`` (any leading shape)."""
    layers = model.layers
    h = preact
    for index in range(layer_index, len(layers)):
        if index > layer_index:
            h = layers[index](h)
        if index < len(layers) - 1:
            h = model.activation.fn(h)
    return h


def noisy_losses(
    model: MLP,
    trace: Trace,
    layer_index: int,
    y: torch.Tensor,
    std: float,
    repeats: int,
    generator: np.random.Generator | KeyedStream,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward noise ``z ~ N(0, std^2 I)`` on layer ``l``'s output, ``K`` repeats (Algorithm 1),
    drawn from ``generator`` (a secret-keyed ChaCha20 stream in training): returns ``z`` of shape
    ``(K, B, out)`` and the noisy losses ``L_k`` of shape ``(K, B)``."""
    v = trace.preacts[layer_index]
    z = std * torch_normal(generator, (repeats, *v.shape), v.dtype)
    logits = forward_from(model, layer_index, v.unsqueeze(0) + z)
    losses = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.repeat(repeats), reduction="none")
    return z, losses.view(repeats, -1)


def lr_factor(z: torch.Tensor, losses: torch.Tensor, std: float) -> torch.Tensor:
    """``e = mean_k(L_k z_k) / sigma^2`` per example, ``(B, out)``: the proxy is ``e x~^T`` (eq. 4)."""
    return (losses.unsqueeze(-1) * z).mean(0) / std**2


def proxy_norms(factors: list[torch.Tensor], inputs: list[torch.Tensor]) -> torch.Tensor:
    """Per-example L2 norm of the whole proxy over all layers: ``||e x~^T||_F = ||e|| ||x~||``."""
    squared = sum(e.pow(2).sum(1) * (x.pow(2).sum(1) + 1) for e, x in zip(factors, inputs))
    return squared.sqrt()  # type: ignore[union-attr]


@dataclass
class LayerSum:
    """Clipped sum of per-example contributions of one linear layer."""

    weight: torch.Tensor
    bias: torch.Tensor


def clipped_sum(factors: list[torch.Tensor], inputs: list[torch.Tensor], clip: float) -> list[LayerSum]:
    """Clip each example's contribution to overall L2 norm ``clip`` (Algorithm 1, "Clip gradient";
    ``C`` is the overall clip bound of the notation table) and sum over the batch, per layer.

    The one point where per-example contributions are clipped and summed before noise."""
    scale = torch.clamp(clip / proxy_norms(factors, inputs).clamp_min(1e-12), max=1.0)
    out = []
    for e, x in zip(factors, inputs):
        weighted = e * scale[:, None]
        out.append(LayerSum(weight=weighted.T @ x, bias=weighted.sum(0)))
    return out


def second_moment(inputs: torch.Tensor, clean_losses: torch.Tensor) -> torch.Tensor:
    """``M = sum_d L0_d^2 x~_d x~_d^T`` in float64 (eq. 7's covariance, up to ``I_out (x)``)."""
    xt = with_bias(inputs).double()
    return (xt * clean_losses.double().pow(2)[:, None]).T @ xt


def controller_std(min_eigenvalue: float, repeats: int, clip: float, sigma0: float) -> float:
    """Largest forward-noise std eq. 7 allows: ``sqrt(lambda_min / (K C^2 sigma_0^2))``."""
    return (max(min_eigenvalue, 0.0) / (repeats * clip**2 * sigma0**2)) ** 0.5


def remediation_variances(
    eigenvalues: torch.Tensor, std: float, repeats: int, clip: float, sigma0: float
) -> torch.Tensor:
    """Appendix A.4: extra variance per eigen-direction, ``max(0, sigma_0^2 C^2 - Lambda / K)``
    with ``Lambda = eig(M) / sigma^2`` the batch proxy covariance's spectrum (eq. 25)."""
    return (sigma0**2 * clip**2 - eigenvalues / (std**2 * repeats)).clamp_min(0.0)


def remediation_noise(
    eigenvectors: torch.Tensor, variances: torch.Tensor, out_features: int, generator: np.random.Generator
) -> torch.Tensor:
    """Noise with covariance ``Q diag(variances) Q^T`` on each of the ``out`` rows of ``[W, b]``:
    ``Xi diag(sqrt(variances)) Q^T``, ``Xi`` standard normal from ``generator``."""
    xi = torch_normal(generator, (out_features, variances.shape[0]), torch.float64)
    return ((xi * variances.sqrt()) @ eigenvectors.T).float()
