"""The one-run audit (Steinke, Nasr, Jagielski 2023): its bound, and its teeth on DP-DFA."""

from __future__ import annotations

import math

import pytest
from scipy import optimize, stats

import torch

from trainers.audit import audit_black_box, audit_multi_run, audit_white_box, epsilon_lower_bound, p_value
from trainers.methods import register_method, unregister_method
from trainers.methods.dp_dfa import DPDFA
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


def _config(method="dp-dfa", **kw):
    return TrainConfig.for_method(method, **{"epochs": 4, "batch_size": 100, "hidden": (16, 16), "alignment": False,
                                             "noise_multiplier": 5.0, **kw})


DATA = dict(n_train=200, n_test=100)


def _audit(wrap=None, view=None, **kw):
    return audit_white_box(_config(**kw), canaries=400, guess_counts=(20, 50, 100), wrap_release=wrap,
                           attacker_view=view, data=clusters(**DATA))


def _public_noise(step: int, like: torch.Tensor, std: float) -> torch.Tensor:
    """Noise 'rebuilt from a public seed': anyone can draw it again from the step number."""
    generator = torch.Generator().manual_seed(1234 + step)
    return std * torch.randn(like.shape, generator=generator, dtype=like.dtype).to(like.device)


def _seeded_noise_run(**kw):
    """A mechanism whose noise has the right size but comes from a public seed; the auditor
    subtracts the rebuilt noise before scoring (the replay attack)."""
    std = {}

    def wrap(release):
        def seeded(u):
            std["value"] = float((release(torch.zeros_like(u))).std())  # the mechanism's own noise size
            std["step"] = std.get("step", -1) + 1
            return u + _public_noise(std["step"], u, std["value"])
        return seeded

    return _audit(wrap, view=lambda released, step: released - _public_noise(step, released, std["value"]), **kw)


@pytest.mark.parametrize("name, wrap", [
    ("noise switched off", lambda release: (lambda u: u)),
    ("noise divided by 10", lambda release: (lambda u: u + (release(u) - u) / 10)),
])
def test_audit_flags_a_broken_mechanism(name, wrap):
    result = _audit(wrap)
    assert result["epsilon_lower_bound"] > result["claimed_epsilon"], name


def test_audit_flags_an_understated_sensitivity():
    """The update is 8x larger than the sensitivity the noise was calibrated to (an understated
    clip bound). A 2x understatement is below this one-run audit's power at this size (measured:
    bound 0.38-0.41 against the claim 0.95 at z = 10), so the test plants 8x (bound 1.6-2.3)."""
    result = _audit(lambda release: (lambda u: release(8 * u) / 8), noise_multiplier=10.0)
    assert result["epsilon_lower_bound"] > result["claimed_epsilon"]


def test_audit_flags_noise_rebuilt_from_a_public_seed():
    result = _seeded_noise_run()
    assert result["epsilon_lower_bound"] > result["claimed_epsilon"]


def test_audit_flags_lattice_noise_added_to_a_continuous_update():
    """Integer multiples of a step ``h`` (half the noise std, so the noise keeps about its size)
    added to an update that was NOT rounded to the lattice: the release modulo ``h`` is the
    update's own value there, which the auditor scores (the canary, ``+-Delta/2``, is below ``h/2``)."""
    lattice = {}

    def wrap(release):
        def continuous(u):
            noise = release(torch.zeros_like(u))
            lattice["h"] = float(noise.std()) / 2
            return u + torch.round(noise / lattice["h"]) * lattice["h"]
        return continuous

    def remainder(released, step):
        h = lattice["h"]
        return released - torch.round(released / h) * h

    result = _audit(wrap, view=remainder)
    assert result["epsilon_lower_bound"] > result["claimed_epsilon"]


@pytest.mark.parametrize("sampling", ["poisson", "fixed"])
def test_sound_dp_sgd_never_audits_above_its_claim(sampling):
    result = _audit(method="dp-sgd", sampling=sampling)
    assert result["method"] == "dp-sgd" and 0 < result["claimed_epsilon"]
    assert result["epsilon_lower_bound"] <= result["claimed_epsilon"]


def test_dp_sgd_with_noise_off_is_flagged():
    result = _audit(lambda release: (lambda u: u), method="dp-sgd")
    assert result["epsilon_lower_bound"] > result["claimed_epsilon"]


@pytest.mark.parametrize("extra", [{}, {"noise_source": "device", "profile": "opu-sim-dp"}])
def test_sound_dp_dfa_never_audits_above_its_claim(extra):
    result = _audit(**extra)
    assert result["epsilon_lower_bound"] <= result["claimed_epsilon"]


# -- black-box: input canaries scored by the final model's loss --------------------------------
class NoiselessDPDFA(DPDFA):
    """A broken mechanism (test fixture): claims dp-dfa's epsilon, releases without noise."""

    name = "dp-dfa-noiseless-fixture"

    def release_update(self, u):
        return u


def _black_box(method="dp-dfa"):
    config = TrainConfig.for_method(method, noise_multiplier=40.0, epochs=60, batch_size=100, lr=0.01,
                                    hidden=(64,), alignment=False)
    return audit_black_box(config, canaries=200, guess_counts=(10, 25, 50), data=clusters(n_train=400, features=40))


def test_black_box_input_canaries_flag_a_noiseless_run():
    register_method(NoiselessDPDFA)
    try:
        result = _black_box(NoiselessDPDFA.name)
    finally:
        unregister_method(NoiselessDPDFA.name)
    assert result["epsilon_lower_bound"] > result["claimed_epsilon"]


def test_sound_dp_dfa_stays_below_its_claim_black_box():
    result = _black_box()
    assert result["neighboring"] == "replace_one"
    assert result["epsilon_lower_bound"] <= result["claimed_epsilon"]


@pytest.mark.parametrize("method, extra", [
    ("dp-sgd", {"noise_multiplier": 1.0}),
    ("dp-ulr", {"noise_multiplier": 4.0}),
    ("dp-mac", {"noise_multiplier": 1.0}),
    ("photonic-dp", {}),  # no proven bound: the claim is infinite, the audit still runs
])
def test_every_private_method_black_box_audits_at_or_below_its_claim(method, extra):
    config = TrainConfig.for_method(method, epochs=4, batch_size=100, hidden=(16, 12), alignment=False, **extra)
    result = audit_black_box(config, canaries=200, guess_counts=(10, 25, 50), data=clusters(n_train=1200))
    assert result["method"] == method and result["steps"] > 0
    assert result["epsilon_lower_bound"] <= result["claimed_epsilon"]


def test_clopper_pearson_multi_run_bound_matches_its_closed_form():
    import numpy as np

    from trainers.audit import multi_run_lower_bound
    # Perfect separation, 20 runs each side: at the separating threshold FNR = FPR = 0 and the
    # upper bounds are 1 - a^(1/20) with a = (1 - confidence) / (2 * thresholds).
    scores_in, scores_out = np.arange(20) + 100.0, np.arange(20) * 1.0
    bound, threshold = multi_run_lower_bound(scores_in, scores_out, 0.0, 0.95)
    upper = 1 - (0.05 / (2 * 40)) ** (1 / 20)
    assert threshold == 100.0 and bound == pytest.approx(math.log((1 - upper) / upper), rel=1e-9)
    assert multi_run_lower_bound(np.zeros(20), np.zeros(20), 0.0, 0.95)[0] == 0.0


def test_multi_run_audit_flags_a_noiseless_run_and_not_a_sound_one():
    # Full batches (rate 1: the canary joins every step, and without noise the rest of the update is
    # the same in every run, so the two signs separate); 15 runs a side cap the bound near 0.7-0.8
    # (Clopper-Pearson with Bonferroni over the thresholds), so the claim is kept below it: z = 40
    # over 2 steps claims 0.125.
    config = _config(epochs=2, noise_multiplier=40.0, batch_size=DATA["n_train"])
    broken = audit_multi_run(config, runs=30, wrap_release=lambda release: (lambda u: u), data=clusters(**DATA))
    assert broken["epsilon_lower_bound"] > broken["claimed_epsilon"]
    sound = audit_multi_run(config, runs=30, data=clusters(**DATA))
    assert sound["epsilon_lower_bound"] <= sound["claimed_epsilon"]
