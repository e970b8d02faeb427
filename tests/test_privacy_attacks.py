"""Attacks on the noise mechanisms as an adversary would run them (issue 12).

(a) lattice: integer noise scaled by a step leaks the update's position in the lattice cell;
(b) replay: noise rebuilt from anything public (profile seed, config seed) is subtracted;
(c) a likelihood-ratio test on a one-dimensional instance, whose empirical epsilon (Clopper-Pearson
    at 95%) must stay within the claimed per-step epsilon.
Each attack is also run against a deliberately broken mechanism, to show it has teeth.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

import opu_hal
from opu_hal.privacy import Accountant, GaussianEvent
from opu_hal.privacy.mechanisms import GaussianRelease, SkellamRelease
from opu_hal.privacy.skellam import SkellamEvent, SkellamLattice

TRIALS = 200


# -- mechanisms under attack -------------------------------------------------------------------------
def skellam_release(d: int = 64, sensitivity: float = 1.0, z: float = 1.0, profile: str = "opu-sim-dp"):
    lattice = SkellamLattice(dimension=d, sensitivity=sensitivity, resolution=10.0)
    return SkellamRelease(opu_hal.load_device(profile), lattice, lattice.poisson_mean(z))


class LatticeNoiseRelease:
    """The mechanism as it was before issue 12: integer device noise scaled onto a continuous update."""

    def __init__(self, noise_std: float, step: float, seed: int | None = None) -> None:
        self.noise_std, self.step = noise_std, step
        self.generator = np.random.default_rng(seed)

    def release(self, u: torch.Tensor) -> torch.Tensor:
        counts = self.generator.poisson(100.0, u.numel()) - self.generator.poisson(100.0, u.numel())
        return u + self.step * torch.from_numpy(counts).to(u.dtype).view_as(u)


class SeededGaussianRelease:
    """Software noise from a seed that the result record publishes."""

    def __init__(self, noise_std: float, seed: int) -> None:
        self.noise_std, self.seed = noise_std, seed

    def release(self, u: torch.Tensor) -> torch.Tensor:
        noise = torch.randn(u.numel(), generator=torch.Generator().manual_seed(self.seed), dtype=torch.float64)
        return u + self.noise_std * noise.to(u.dtype).view_as(u)


# -- (a) lattice --------------------------------------------------------------------------------------
def lattice_attack(mechanism, step: float, separation: float, trials: int = TRIALS) -> float:
    """Success rate of guessing which of two close updates was released, from integrality."""
    rng = np.random.default_rng(7)
    wins = 0
    for _ in range(trials):
        u0 = torch.from_numpy(rng.normal(size=64)).double()
        u1 = u0 + separation
        truth = int(rng.integers(2))
        y = mechanism.release((u0, u1)[truth]).double()
        miss = [float(((y - u) / step - torch.round((y - u) / step)).abs().sum()) for u in (u0, u1)]
        wins += int(int(np.argmin(miss)) == truth)
    return wins / trials


CHANCE_LIMIT = 0.5 + 4 * math.sqrt(0.25 / TRIALS)


def test_lattice_attack_breaks_integer_noise_added_to_a_continuous_update():
    assert lattice_attack(LatticeNoiseRelease(1.0, step=0.7), step=0.7, separation=1e-5) >= 0.95


def test_lattice_attack_is_at_chance_on_the_skellam_release():
    mechanism = skellam_release()
    assert lattice_attack(mechanism, step=1 / mechanism.lattice.gamma, separation=1e-5) <= CHANCE_LIMIT


def test_lattice_attack_is_at_chance_on_software_gaussian_noise():
    assert lattice_attack(GaussianRelease(1.0), step=0.7, separation=1e-5) <= CHANCE_LIMIT


# -- (b) replay ---------------------------------------------------------------------------------------
def replay_attack(mechanism, rebuild, trials: int = 20) -> float:
    """Success rate of subtracting noise rebuilt from public seeds and matching the exact update."""
    rng = np.random.default_rng(3)
    wins = 0
    for _ in range(trials):
        u0 = torch.from_numpy(rng.normal(size=256)).double()
        u1 = u0 + 1e-3
        truth = int(rng.integers(2))
        y = mechanism.release((u0, u1)[truth]).double()
        residual = [float((y - rebuild(u.numel()) - u).abs().max()) for u in (u0, u1)]
        wins += int(int(np.argmin(residual)) == truth and min(residual) < 1e-6)
    return wins / trials


def _public_seed_rebuilds(noise_std: float):
    """Every stream an attacker can rebuild from public seeds: the profile's (0..3 streams), the config's."""

    def rebuild_seed(seed):
        return lambda n: noise_std * torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)

    return [rebuild_seed(s) for s in range(4)]


def test_replay_attack_breaks_noise_drawn_from_a_published_seed():
    mechanism = SeededGaussianRelease(0.5, seed=2)
    assert max(replay_attack(mechanism, r) for r in _public_seed_rebuilds(0.5)) == 1.0


def test_replay_attack_fails_on_secure_software_noise():
    assert max(replay_attack(GaussianRelease(0.5), r) for r in _public_seed_rebuilds(0.5)) == 0.0


def test_two_devices_from_one_profile_draw_different_privacy_counts():
    first = opu_hal.load_device("opu-sim-dp").draw_privacy_counts(1000, 1e4).counts
    second = opu_hal.load_device("opu-sim-dp").draw_privacy_counts(1000, 1e4).counts
    assert not torch.equal(first, second)


# -- (c) likelihood-ratio test in one dimension -------------------------------------------------------
def empirical_epsilon(scores0: np.ndarray, scores1: np.ndarray, delta: float, confidence: float = 0.95) -> float:
    """Largest epsilon lower bound over thresholds, from one-sided Clopper-Pearson bounds on FPR/FNR
    (a Bonferroni split of 1 - confidence over the thresholds tried)."""
    thresholds = np.quantile(np.concatenate([scores0, scores1]), np.linspace(0.01, 0.99, 25))
    alpha = (1 - confidence) / (2 * len(thresholds))
    n0, n1 = len(scores0), len(scores1)
    best = 0.0
    for t in thresholds:
        false_pos, false_neg = int((scores0 >= t).sum()), int((scores1 < t).sum())
        fpr_up = stats.beta.ppf(1 - alpha, false_pos + 1, n0 - false_pos) if false_pos < n0 else 1.0
        fnr_up = stats.beta.ppf(1 - alpha, false_neg + 1, n1 - false_neg) if false_neg < n1 else 1.0
        if 1 - delta - fnr_up > 0:
            best = max(best, math.log((1 - delta - fnr_up) / fpr_up))
    return best


def _scores_skellam(mechanism: SkellamRelease, claimed_mean: float, trials: int):
    """LLR of the exact Skellam laws at the accounted mean, for u = 0 and u = Delta (one coordinate)."""
    gamma = mechanism.lattice.gamma
    shift = round(gamma * mechanism.lattice.sensitivity)

    def llr(y):
        n = np.rint(y.numpy() * gamma)
        return stats.skellam.logpmf(n - shift, claimed_mean, claimed_mean) - stats.skellam.logpmf(
            n, claimed_mean, claimed_mean
        )

    zero = torch.zeros(trials, dtype=torch.float64)
    return (llr(mechanism.release(zero)), llr(mechanism.release(zero + mechanism.lattice.sensitivity)))


DELTA = 1e-5
LRT_TRIALS = 20_000


def _claimed(event) -> float:
    accountant = Accountant("replace_one")
    accountant.step(event)
    return accountant.get_epsilon(DELTA)


def test_likelihood_ratio_test_stays_within_the_skellam_claim():
    # One coordinate; release each of the 20 000 trials independently (the mechanism is coordinate-wise).
    mechanism = skellam_release(d=1, z=2.0, profile="torch-cpu")
    lattice = mechanism.lattice
    claim = _claimed(SkellamEvent(lattice.l2_sensitivity, lattice.l1_sensitivity, mechanism.poisson_mean))
    s0, s1 = _scores_skellam(mechanism, mechanism.poisson_mean, LRT_TRIALS)
    assert empirical_epsilon(s0, s1, DELTA) <= claim


def test_likelihood_ratio_test_catches_skellam_noise_ten_times_smaller_than_claimed():
    honest = skellam_release(d=1, z=2.0, profile="torch-cpu")
    lattice = honest.lattice
    claim = _claimed(SkellamEvent(lattice.l2_sensitivity, lattice.l1_sensitivity, honest.poisson_mean))
    broken = SkellamRelease(honest.device, lattice, honest.poisson_mean / 100)  # std / 10
    s0, s1 = _scores_skellam(broken, broken.poisson_mean, LRT_TRIALS)
    assert empirical_epsilon(s0, s1, DELTA) > claim


@pytest.mark.parametrize("noise_scale, caught", [(1.0, False), (0.1, True)])
def test_likelihood_ratio_test_on_gaussian_noise_flags_only_the_broken_variant(noise_scale, caught):
    z = 2.0
    claim = _claimed(GaussianEvent(z))
    mechanism = GaussianRelease(z * noise_scale)
    zero = torch.zeros(LRT_TRIALS, dtype=torch.float64)
    s0 = mechanism.release(zero).numpy()  # LLR of N(1, z^2) vs N(0, z^2) is monotone in y
    s1 = mechanism.release(zero + 1).numpy()
    assert (empirical_epsilon(s0, s1, DELTA) > claim) is caught


# -- (b) replay, through every private method ---------------------------------------------------------
@pytest.mark.parametrize(
    "method, extra",
    [
        ("dp-sgd", {}),
        ("dp-dfa", {}),
        ("dp-dfa", {"noise_source": "device", "profile": "opu-sim-dp"}),
        ("dp-ulr", {"noise_multiplier": 4.0}),
        ("dp-mac", {}),
    ],
)
def test_two_runs_with_the_same_public_settings_release_different_noise(method, extra):
    """Everything public (config, seeds, profile) is identical, so equal models would mean the noise
    (or the batches) can be rebuilt from what the record publishes."""
    from tests.training_helpers import clusters
    from trainers.run.config import TrainConfig
    from trainers.run.loop import train

    options = {"noise_multiplier": 1.0, **extra}
    config = TrainConfig.for_method(
        method, features="pixels", epochs=1, batch_size=50, hidden=(16, 16), alignment=False, **options
    )
    runs = [train(config, data=clusters(), progress=False, log=lambda m: None) for _ in range(2)]
    assert runs[0]["epochs"][0]["validation_loss"] != runs[1]["epochs"][0]["validation_loss"]


def test_non_private_training_is_reproducible_from_its_seed():
    from tests.training_helpers import clusters
    from trainers.run.config import TrainConfig
    from trainers.run.loop import train

    config = TrainConfig.for_method("bp", epochs=1, batch_size=50, hidden=(16, 16), alignment=False)
    runs = [train(config, data=clusters(), progress=False, log=lambda m: None) for _ in range(2)]
    assert runs[0]["epochs"][0]["validation_loss"] == runs[1]["epochs"][0]["validation_loss"]
