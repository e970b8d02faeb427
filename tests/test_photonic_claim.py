"""Paper 000's eq. 17 is a claim, not a bound; photonic DP-DFA has no finite bound (issue 18, item 1)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import optimize, stats

from opu_hal.privacy import (
    PHOTONIC_DP_UNBOUNDED_REASON,
    Accountant,
    PhotonicDFAEvent,
    PrivacyBudget,
    PrivacyParameterError,
    UnboundedEvent,
)
from tests.training_helpers import torch_device
from trainers.core.model import MLP
from trainers.methods import METHODS, MethodContext
from trainers.run.config import TrainConfig

# The example: n_l = 10, m = 16, g = gamma_min tau_h_min = 0.5, G = gamma_max tau_h_max = 1.
COUNTEREXAMPLE = dict(
    n_l=10, batch_size=16, sigma=1e4, gamma_min=0.5, gamma_max=1.0, tau_h_min=1.0, tau_h_max=1.0, tau_b=1.0
)
M, G_MIN, G_MAX, N_L = 16, 0.5, 1.0, 10
R = ((M - 1) * G_MIN**2 + G_MAX**2) / (M * G_MIN**2)  # per-coordinate variance ratio of the pair


def pair_delta(epsilon: float, dimension: int = N_L, r: float = R) -> float:
    """delta(epsilon) of P = N(0, r s^2 I) against Q = N(0, s^2 I), closed form by chi-square laws.
    The loss log P/Q = -(d/2) log r + (1 - 1/r) ||x||^2 / (2 s^2) exceeds epsilon iff
    ||x||^2 / s^2 > t = (2 epsilon + d log r) / (1 - 1/r)."""
    t = (2 * epsilon + dimension * math.log(r)) / (1 - 1 / r)
    return stats.chi2.sf(t / r, dimension) - math.exp(epsilon) * stats.chi2.sf(t, dimension)


def test_the_pair_has_infinite_renyi_divergence_beyond_r_over_r_minus_one():
    """D_alpha(N(0, r) || N(0, 1)) = (alpha log r - log(alpha - (alpha - 1) r)) / (2 (alpha - 1)) per
    coordinate, finite only while alpha - (alpha - 1) r > 0, i.e. alpha < r / (r - 1) = 6.33."""
    assert pytest.approx(6.333, abs=1e-3) == R / (R - 1)
    for alpha in (2.0, 6.0):
        variance_mix = alpha - (alpha - 1) * R
        assert variance_mix > 0
    assert 7.0 - 6.0 * R < 0  # alpha = 7: the integral diverges
    assert np.isfinite(PhotonicDFAEvent(**COUNTEREXAMPLE).epsilon_pdfa(np.array([7.0, 64.0, 1024.0]))).all()


def test_eq17_claims_less_than_a_pair_its_clipping_allows_needs():
    accountant = Accountant("replace_one")
    accountant.step(PhotonicDFAEvent(**COUNTEREXAMPLE))
    claim = accountant.paper_claim_epsilon(1e-5)
    needed = optimize.brentq(lambda e: pair_delta(e) - 1e-5, 0, 50)
    assert claim == pytest.approx(1.0428, abs=1e-4) and needed == pytest.approx(2.6248, abs=1e-4)
    assert pair_delta(claim) == pytest.approx(5.8e-3, rel=0.02)  # true delta at the claimed epsilon


def test_monte_carlo_of_the_pair_agrees_with_the_closed_form():
    """Independent of the chi-square formula: delta = E_P[(1 - exp(epsilon - L))_+] with the loss L
    of draws x ~ P = N(0, r s^2 I) (low variance: the integrand is in [0, 1))."""
    rng = np.random.default_rng(0)
    claim, draws = 1.0428, 1_000_000
    x = rng.normal(0.0, math.sqrt(R), size=(draws, N_L))
    loss = -N_L / 2 * math.log(R) + (1 - 1 / R) * np.sum(x * x, axis=1) / 2
    delta = float(np.mean(np.clip(1 - np.exp(claim - loss), 0, None)))
    assert delta == pytest.approx(pair_delta(claim), rel=0.03) and delta > 5e-3


def test_a_published_claim_is_never_reported_or_budgeted_as_a_guarantee():
    accountant = Accountant("replace_one")
    accountant.step(PhotonicDFAEvent(**COUNTEREXAMPLE))
    for read in (accountant.get_epsilon, accountant.get_epsilon_and_order):
        with pytest.raises(PrivacyParameterError, match="not a valid bound"):
            read(1e-5)
    with pytest.raises(PrivacyParameterError, match="not a valid bound"):
        PrivacyBudget(8.0, 1e-5).allows(Accountant("replace_one"), PhotonicDFAEvent(**COUNTEREXAMPLE))


def _first_layer_grad(method, x: torch.Tensor) -> torch.Tensor:
    method.current_step = 0
    method.compute_gradients(x, torch.zeros(len(x), dtype=torch.long))
    return method.model.layers[0].weight.grad.clone()


def test_photonic_dp_update_reveals_whether_an_input_direction_was_sampled():
    """The trainer's own update (eq. 8): noise enters before ``* phi'(z) h^T``, so the first layer's
    update has rank 1 when every input shares a direction and rank 2 once one input does not,
    whatever the noise: the two laws are mutually singular, delta >= m/N at every epsilon."""
    config = TrainConfig.for_method("photonic-dp", epochs=1, batch_size=16, hidden=(16, 24), seed=0, sigma=0.5)
    method = METHODS["photonic-dp"](
        MLP([20, 16, 24, 10]), MethodContext(config, torch_device(noise_std=0.5), 20, 10, 600)
    )
    same = torch.zeros(16, 20)
    same[:, 0] = 3.0
    neighbour = same.clone()
    neighbour[5] = 0.0
    neighbour[5, 1] = 3.0
    for _ in range(3):  # fresh noise each time; the ranks never change
        assert torch.linalg.matrix_rank(_first_layer_grad(method, same), rtol=1e-5) == 1
        assert torch.linalg.matrix_rank(_first_layer_grad(method, neighbour), rtol=1e-5) == 2


def test_photonic_dp_is_charged_infinity_with_the_reason():
    config = TrainConfig.for_method("photonic-dp", epochs=1, batch_size=16, hidden=(16, 24), seed=0, sigma=0.5)
    method = METHODS["photonic-dp"](
        MLP([20, 16, 24, 10]), MethodContext(config, torch_device(noise_std=0.5), 20, 10, 600)
    )
    event = method.planned_event()
    assert event == UnboundedEvent(PHOTONIC_DP_UNBOUNDED_REASON) and "span" in event.reason
    accountant = Accountant("replace_one")
    accountant.step(event)
    assert math.isinf(accountant.get_epsilon(1e-5))
    assert not PrivacyBudget(1e6, 1e-5).allows(Accountant("replace_one"), event)
