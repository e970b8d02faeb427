"""The one-run audit (Steinke, Nasr, Jagielski 2023): its bound, and its teeth on DP-DFA."""

from __future__ import annotations

import math

import pytest
from scipy import optimize, stats

from trainers.audit import audit_dp_dfa, epsilon_lower_bound, p_value
from trainers.config import TrainConfig

from .training_helpers import clusters


def test_pure_dp_bound_is_the_binomial_tail_inverted():
    # delta = 0: the bound solves P[Binomial(r, e^eps / (1 + e^eps)) >= v] = 1 - confidence.
    m, r, v = 1000, 100, 90
    expected = optimize.brentq(lambda e: stats.binom.sf(v - 1, r, 1 / (1 + math.exp(-e))) - 0.05, 0, 20)
    assert epsilon_lower_bound(m, r, v, 0.0, 0.95) == pytest.approx(expected, abs=1e-6)


def test_chance_guessing_gives_no_bound_and_delta_only_lowers_it():
    assert epsilon_lower_bound(1000, 100, 50, 1e-5, 0.95) == 0.0
    assert epsilon_lower_bound(1000, 100, 95, 1e-3, 0.95) < epsilon_lower_bound(1000, 100, 95, 0.0, 0.95)
    assert p_value(1000, 100, 95, 0.0, 0.0) < 1e-15


def _config(**kw):
    return TrainConfig.for_method("dp-dfa", epochs=4, batch_size=100, hidden=(16, 16), alignment=False,
                                  noise_multiplier=5.0, **kw)


DATA = dict(n_train=200, n_test=100)


def _audit(wrap=None, **kw):
    return audit_dp_dfa(_config(**kw), canaries=400, guess_counts=(20, 50, 100), wrap_release=wrap,
                        data=clusters(**DATA))


@pytest.mark.parametrize("name, wrap", [
    ("noise switched off", lambda release: (lambda u: u)),
    ("noise divided by 10", lambda release: (lambda u: u + (release(u) - u) / 10)),
])
def test_audit_flags_a_broken_mechanism(name, wrap):
    result = _audit(wrap)
    assert result["epsilon_lower_bound"] > result["claimed_epsilon"], name


@pytest.mark.parametrize("extra", [{}, {"noise_source": "device", "profile": "opu-sim-dp"}])
def test_sound_dp_dfa_never_audits_above_its_claim(extra):
    result = _audit(**extra)
    assert result["epsilon_lower_bound"] <= result["claimed_epsilon"]
