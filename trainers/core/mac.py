"""The method of auxiliary coordinates as DP-MAC uses it (Harder et al., paper 003).

Per-layer objectives (eq. 2-3, ``mu = 1``): hidden layer ``k``:
``E_k = 1/(2N) sum_n ||z_{k,n} - f(W_k z_{k-1,n})||^2``; output layer: binary cross-entropy of
``sigmoid(W_o z_K)`` against the one-hot label (section 2.2, "analogously in the output layer").
Their Taylor expansion at the current ``W-hat`` (eq. 4) has coefficients ``a_k``, ``b_kh``,
``C_kh``; with Adam and one W-step the first-order expansion is used and only ``b`` is perturbed
(section 2.2). Per example, ``b_k^(n)`` is the outer product ``delta_n z~_{k-1,n}^T``.

Sensitivities: norm clipping of each example's ``b_k^(n)`` to ``T_bk`` (section 2.2, "a more
direct approach"; sum sensitivity ``T_bk`` under add/remove) is what training uses. The analytic
bounds of Appendices E-G are given as functions (:func:`paper_delta_b_hidden`, ...), stated as the
paper writes them, with the doubts noted there; tests measure them against replaced examples.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from opu_hal.randomness.draws import torch_normal

from .model import MLP


def aux_coordinates(
    model: MLP, x: torch.Tensor, y: torch.Tensor, steps: int, lr: float, t_z: float
) -> list[torch.Tensor]:
    """Z-step (Algorithm 1, step 1): start from the forward pass, ``steps`` gradient steps on
    eq. 2 over ``Z`` with ``W`` fixed, then ``||z_{k,n}|| <= T_z`` (Appendix D's assumption).
    Each ``z_n`` depends on example ``n`` only. Returns ``[x, z_1, ..., z_K]``.

    The gradient is written out (:func:`z_gradients`): the first layer's target ``f(W_1 x)`` does not
    move with ``Z`` and is computed once, and no autograd graph is built per step."""
    layers, f = model.layers, model.activation.fn
    with torch.no_grad():
        h, zs = x, []
        for layer in layers[:-1]:
            h = f(layer(h))
            zs.append(h.clone())
        onehot = F.one_hot(y, layers[-1].out_features).to(x.dtype)
        first_target = zs[0].clone()  # f(W_1 x), fixed while W is
        for _ in range(steps):
            for z, g in zip(zs, z_gradients(model, zs, first_target, onehot)):
                z.sub_(g, alpha=lr)
        return [x, *[clip_rows(z, t_z) for z in zs]]


def z_gradients(
    model: MLP, zs: list[torch.Tensor], first_target: torch.Tensor, onehot: torch.Tensor
) -> list[torch.Tensor]:
    """``dE / dz_k`` of eq. 2 (``mu = 1``) for ``E = sum_k 1/2 ||z_k - f(W_k z_{k-1})||^2 + BCE(W_o z_K)``:
    ``r_k = z_k - f(u_k)`` from layer ``k``'s own term, ``- (r_{k+1} f'(u_{k+1})) W_{k+1}`` from the next
    layer's, and ``(sigmoid(W_o z_K) - y) W_o`` from the output's."""
    layers, act = model.layers, model.activation
    pre = [None, *(layers[k](zs[k - 1]) for k in range(1, len(zs)))]  # u_k = W_k z_{k-1}, k >= 1
    grads = [zs[0] - first_target, *(z - act.fn(u) for z, u in zip(zs[1:], pre[1:]))]  # r_k
    for k in range(1, len(zs)):  # layer k's term pulls on z_{k-1} through W_k, with r_k before it changes
        grads[k - 1] -= (grads[k] * act.derivative(pre[k])) @ layers[k].weight
    out = layers[-1]
    grads[-1] += (torch.sigmoid(out(zs[-1])) - onehot) @ out.weight
    return grads


def clip_rows(v: torch.Tensor, bound: float) -> torch.Tensor:
    return v * torch.clamp(bound / v.norm(dim=1, keepdim=True).clamp_min(1e-12), max=1.0)


def layer_deltas(model: MLP, coords: list[torch.Tensor], y: torch.Tensor) -> list[torch.Tensor]:
    """Per example, the ``delta_n`` with ``b_k^(n) = delta_n z~_{k-1,n}^T``: first-order coefficient
    of each layer's objective at ``W-hat`` (half of ``dT_nkh``, section 2.2's expression)."""
    layers, act = model.layers, model.activation
    deltas = []
    with torch.no_grad():
        for k, layer in enumerate(layers):
            u = layer(coords[k])
            if k < len(layers) - 1:
                deltas.append(-(coords[k + 1] - act.fn(u)) * act.derivative(u))
            else:
                deltas.append(torch.sigmoid(u) - F.one_hot(y, layer.out_features).to(u.dtype))
    return deltas


def coefficient_norms(deltas: list[torch.Tensor], coords: list[torch.Tensor]) -> torch.Tensor:
    """``||b_k^(n)||_F = ||delta_n|| ||z~_{k-1,n}||``, shape ``(layers, batch)``."""
    return torch.stack([d.norm(dim=1) * (c.pow(2).sum(1) + 1).sqrt() for d, c in zip(deltas, coords)])


def clipped_layer_sums(
    deltas: list[torch.Tensor], coords: list[torch.Tensor], bounds: list[float]
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Clip each example's ``b_k^(n)`` to ``T_bk`` per layer and sum over the batch: the one point
    where per-example contributions are clipped and summed before noise. ``(weight, bias)`` sums."""
    norms = coefficient_norms(deltas, coords)
    out = []
    for delta, coord, norm, bound in zip(deltas, coords, norms, bounds):
        weighted = delta * torch.clamp(bound / norm.clamp_min(1e-12), max=1.0)[:, None]
        out.append((weighted.T @ coord, weighted.sum(0)))
    return out


def project_columns(model: MLP, t_w: float) -> None:
    """``||w_kh|| <= T_w`` for every unit's incoming weights (Appendix D's assumption)."""
    with torch.no_grad():
        for layer in model.layers:
            layer.weight.copy_(clip_rows(layer.weight, t_w))


# -- DP histogram for per-layer bounds (section 2.4) -----------------------------------------------
def histogram_bound(
    norms: torch.Tensor, t_max: float, bins: int, sigma_hist: float, generator: np.random.Generator
) -> tuple[float, list[float]]:
    """Counts of ``norms`` over ``[0, t_max]`` (``bins`` bins, larger values in the last), each
    perturbed by ``N(0, sigma_hist^2)`` from ``generator`` (a secret-keyed ChaCha20 stream in
    training; sensitivity 1: one example moves one count by one); the
    bound is the upper edge of the largest noisy bin (section 2.4, "as in [15]"; "largest" read
    as the most populated)."""
    index = (norms.clamp(0, t_max) / t_max * bins).long().clamp(max=bins - 1)
    counts = torch.bincount(index, minlength=bins).double()
    noisy = counts + sigma_hist * torch_normal(generator, (bins,), torch.float64)
    top = int(noisy.argmax())
    return t_max * (top + 1) / bins, noisy.tolist()


# -- Appendix E-G: analytic sensitivities, as stated (softplus) ------------------------------------
def _alpha_beta(w_hat: torch.Tensor, t_z: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``alpha_h = f(||w_h|| T_z)``, ``beta_h = f'(||w_h|| T_z)`` for softplus (Appendix D)."""
    s = w_hat.norm(dim=1) * t_z
    return F.softplus(s), torch.sigmoid(s)


def paper_delta_b_hidden(w_hat: torch.Tensor, t_z: float, n: int) -> float:
    """Appendix E: ``Delta b_k <= (Delta b_k1 + Delta b_k2)^(1/2) / N`` with
    ``Delta b_k1 = 2 T_z^2 (T_z^2 + ||alpha (.) beta||^2)`` and
    ``Delta b_k2 = T_z^4 / 8 (T_z^2 ||W||_F^2 + sum_h ||(4 beta_h^2 + alpha_h) w_h||^2)``.
    Doubt: expanding ``|-2 z f' + 2 f f'|^2`` the text drops a factor 4 (it keeps ``2 a^2 + b^2``
    for ``4 (a - b)^2 <= 8 a^2 + 8 b^2``)."""
    alpha, beta = _alpha_beta(w_hat, t_z)
    b1 = 2 * t_z**2 * (t_z**2 + float((alpha * beta).pow(2).sum()))
    rows = ((4 * beta**2 + alpha)[:, None] * w_hat).pow(2).sum()
    b2 = t_z**4 / 8 * (t_z**2 * float(w_hat.pow(2).sum()) + float(rows))
    return math.sqrt(b1 + b2) / n


def paper_delta_c_hidden(w_hat: torch.Tensor, t_z: float, n: int) -> float:
    """Appendix F: ``Delta C_k <= T_z^2 / (4N) (T_z^2 + ||4 beta^2 + alpha||^2)^(1/2)``."""
    alpha, beta = _alpha_beta(w_hat, t_z)
    return t_z**2 / (4 * n) * math.sqrt(t_z**2 + float((4 * beta**2 + alpha).pow(2).sum()))


def paper_delta_c_output(out_features: int, t_z: float, n: int) -> float:
    """Appendix G: ``Delta C_o <= sqrt(D_out) T_z^2 / (16 N)`` (sigmoid output, ``f'' <= 1/4``)."""
    return math.sqrt(out_features) * t_z**2 / (16 * n)


def hidden_coefficients(
    w_hat: torch.Tensor, z_prev: torch.Tensor, z_next: torch.Tensor, n: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Second-order coefficients of one softplus hidden layer, no bias (section 2.2):
    ``b_kh = 1/(2N) sum_n (dT - d2T w_h)``, ``C_kh = 1/(2N) sum_n d2T / 2``; shapes
    ``(out, in)`` and ``(out, in, in)``."""
    u = z_prev @ w_hat.T  # (batch, out)
    f, f1 = F.softplus(u), torch.sigmoid(u)
    f2 = f1 * (1 - f1)
    first = -2 * z_next * f1 + 2 * f * f1  # dT = first * z_prev
    second = -2 * z_next * f2 + 2 * f * f2 + 2 * f1**2  # d2T = second * z_prev z_prev^T
    proj = z_prev @ w_hat.T  # z_prev^T w_h, (batch, out)
    b = ((first - second * proj)[:, :, None] * z_prev[:, None, :]).sum(0) / (2 * n)
    c = torch.einsum("bh,bi,bj->hij", second, z_prev, z_prev) / (4 * n)
    return b, c
