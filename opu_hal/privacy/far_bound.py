"""The far case of the per-coordinate bound (:mod:`.pmf_rdp`, (6)) at every order at once, coarse to fine.

For a shift ``delta = s + theta`` (``s >= 1`` an integer, ``0 <= theta < 1``) joint convexity gives
``D_alpha <= N(theta) / (alpha - 1)`` with ``N(theta) = log((1 - theta) e^{a} + theta e^{b})``, ``a = (alpha - 1)
E(s)``, ``b = (alpha - 1) E(s + 1)`` (:mod:`.rounding`, "Case |delta| > 1"), and the bound on
``D_alpha / delta^2`` is its maximum over ``s`` and ``theta``. ``theta`` is covered by
:data:`THETA_CELLS` cells ``[l, h]``; ``N`` is the log of a linear function of ``theta``, so monotone,
and a cell's bound is ``max(N(l), N(h)) / ((alpha - 1) (s + l)^2)``. The answer is the largest cell
bound.

**Coarse to fine, the same answer.** The cells are grouped :data:`FINE_PER_COARSE` to a coarse cell,
whose own bound (the same formula at its ends) is at least every fine bound inside it. Any ``theta``'s
value ``N(theta) / ((alpha - 1) (s + theta)^2)`` is at most its cell's bound, so the best value at the
coarse edges is a lower bound ``B`` on the answer. Only coarse cells whose bound exceeds ``B`` are
refined (``B`` rising as they are), and a coarse cell left out holds no fine bound above the answer:
the result equals the full fine grid's maximum, at a tenth of its evaluations.
"""

from __future__ import annotations

import numpy as np

THETA_CELLS = 512
FINE_PER_COARSE = 32


def _numerator(theta: np.ndarray, e_s: np.ndarray, e_next: np.ndarray) -> np.ndarray:
    """``N(theta)`` (module docstring); broadcasts."""
    with np.errstate(divide="ignore"):
        out: np.ndarray = np.logaddexp(np.log1p(-theta) + e_s, np.log(theta) + e_next)
    return out


def _cell_bounds(n: np.ndarray, edges: np.ndarray, order_scale: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """Each cell's bound between consecutive ``edges`` (last axis), from ``n = N(edges)``; ``order_scale =
    alpha - 1`` and the shift ``s`` broadcast against them."""
    top = np.maximum(n[..., :-1], n[..., 1:])
    bounds: np.ndarray = top / (order_scale * (shift + edges[..., :-1]) ** 2)
    return bounds


def far_bounds(alphas: np.ndarray, shift_rdp: np.ndarray) -> np.ndarray:
    """``max over s, theta`` for each order: ``shift_rdp[row, s] = E(s)`` at ``alphas[row]``, ``s = 0 ..
    S + 1``; 0 where there is no shift ``s >= 1`` with a successor."""
    count = shift_rdp.shape[1] - 2
    if count <= 0:
        return np.zeros(len(alphas))
    scale = (np.asarray(alphas, dtype=np.float64) - 1)[:, None, None]
    shifts = np.arange(1, count + 1, dtype=np.float64)[None, :, None]
    e_s, e_next = scale * shift_rdp[:, 1:-1, None], scale * shift_rdp[:, 2:, None]
    coarse_edges = np.linspace(0.0, 1.0, THETA_CELLS // FINE_PER_COARSE + 1)
    at_edges = _numerator(coarse_edges[None, None, :], e_s, e_next)
    coarse = _cell_bounds(at_edges, coarse_edges, scale, shifts)
    values = at_edges / (scale * (shifts + coarse_edges) ** 2)
    best: np.ndarray = values.max(axis=(1, 2))  # B: a value some theta attains, at most the answer
    refined = np.zeros(coarse.shape, dtype=bool)
    step = 1.0 / THETA_CELLS
    while True:
        todo = ~refined & (coarse > best[:, None, None])
        if not todo.any():
            return best
        row, shift, cell = np.nonzero(todo)
        fine_edges = (cell[:, None] * FINE_PER_COARSE + np.arange(FINE_PER_COARSE + 1)[None, :]) * step
        fine_n = _numerator(fine_edges, e_s[row, shift], e_next[row, shift])
        fine = _cell_bounds(fine_n, fine_edges, scale[row, 0], (shift + 1.0)[:, None])
        np.maximum.at(best, row, fine.max(axis=1))
        refined |= todo
