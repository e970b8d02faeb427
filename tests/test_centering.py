"""Centring features on a private mean (trainers.core.centering): sensitivity, noise, attack, runs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from opu_hal.privacy import Accountant, GaussianEvent
from opu_hal.randomness.secure_random import SecureGenerator
from tests.test_privacy_attacks import DELTA, empirical_epsilon
from tests.test_scattering import tiny_images_dataset
from tests.training_helpers import SCATTER_LINEAR
from trainers.core import centering
from trainers.core.centering import clipped_sum, feature_radius, private_mean
from trainers.core.errors import TrainingConfigError
from trainers.run.config import TrainConfig
from trainers.run.loop import Trainer, train


def quiet(message: str) -> None:
    pass


def test_each_example_moves_the_clipped_sum_by_at_most_the_radius():
    x = torch.tensor([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]])
    total = clipped_sum(x, radius=1.0)
    assert torch.allclose(total, torch.tensor([0.6 + 0.3, 0.8 + 0.4], dtype=torch.float64))


def test_group_normalised_scatter_features_lie_on_the_radius():
    from trainers.core.feature_cache import cached_scatter_features

    features = cached_scatter_features(tiny_images_dataset(), log=quiet, progress=False)
    norms = features.train.x.norm(dim=1)
    assert float(norms.max()) <= feature_radius(features.n_features) * (1 + 1e-5)
    assert float(norms.min()) >= feature_radius(features.n_features) * 0.999


@pytest.mark.parametrize("neighboring, factor", [("add_remove", 1.0), ("replace_one", 2.0)])
def test_released_sum_carries_noise_of_the_accounted_std(neighboring, factor):
    x = torch.zeros(3, 40_000)
    release = private_mean(x, radius=2.0, noise_multiplier=5.0, public_size=10, neighboring=neighboring)
    noise = release.mean.double() * 10  # the clipped sum is 0
    assert release.noise_std == pytest.approx(5.0 * 2.0 * factor)
    assert float(noise.std()) == pytest.approx(release.noise_std, rel=0.02)
    assert release.event == GaussianEvent(5.0)


def test_two_releases_on_the_same_data_differ_whatever_the_seed():
    torch.manual_seed(0)
    x = torch.ones(4, 8)
    first = private_mean(x, 3.0, 20.0, 4, "add_remove").mean
    torch.manual_seed(0)
    second = private_mean(x, 3.0, 20.0, 4, "add_remove").mean
    assert not torch.equal(first, second)


def _released_sums(data: torch.Tensor, z: float, radius: float, trials: int) -> np.ndarray:
    generator = SecureGenerator()
    return np.array([float(private_mean(data, radius, z, 1, "add_remove", generator).mean[0]) for _ in range(trials)])


LRT_TRIALS = 20_000


@pytest.mark.parametrize("clipping, caught", [(True, False), (False, True)])
def test_likelihood_ratio_test_on_the_mean_flags_only_unclipped_sums(monkeypatch, clipping, caught):
    """Neighbours: two examples at the origin, and the same plus one example far outside the radius
    (add/remove). The released sum is the optimal test statistic for a shift; with clipping the
    empirical epsilon stays within the Gaussian event's, without it the attack exceeds it."""
    if not clipping:
        monkeypatch.setattr(centering, "clipped_sum", lambda x, radius: x.sum(dim=0, dtype=torch.float64))
    z, radius = 2.0, 1.0
    claim = Accountant("add_remove")
    claim.step(GaussianEvent(z))
    without = torch.zeros(2, 1)
    with_one = torch.cat([without, torch.full((1, 1), 5.0)])
    s0 = _released_sums(without, z, radius, LRT_TRIALS)
    s1 = _released_sums(with_one, z, radius, LRT_TRIALS)
    assert (empirical_epsilon(s0, s1, DELTA) > claim.get_epsilon(DELTA)) is caught


def _config(**changes):
    options: dict = dict(SCATTER_LINEAR, center_features=True, centering_noise=20.0)
    options.update(changes)
    method = options.pop("method", "dp-sgd")
    if method == "dp-sgd" and "noise_multiplier" not in options:
        options.setdefault("target_epsilon", 3.0)
    return TrainConfig.for_method(method, **options)


def test_a_private_run_charges_the_mean_before_the_steps_and_stays_within_target(tmp_path, monkeypatch):
    monkeypatch.setenv("OPU_HAL_CACHE", str(tmp_path))
    data = tiny_images_dataset()
    record = train(_config(), data=data, progress=False, log=quiet)
    entries = record["privacy"]["ledger"]["entries"]
    assert entries[0] == {"event": {"kind": "gaussian", "noise_multiplier": 20.0}, "count": 1}
    assert entries[1]["event"]["kind"] == "poisson_gaussian"
    assert 0.99 * 3.0 <= record["final"]["epsilon"] <= 3.0
    plain = train(_config(center_features=False), data=data, progress=False, log=quiet)
    assert record["privacy"]["noise_multiplier"] > plain["privacy"]["noise_multiplier"]  # the mean is paid for
    described = record["privacy"]["centering"]
    assert described["radius"] == pytest.approx(63.0) and described["noise_std_on_sum"] == pytest.approx(1260.0)
    assert "mean" not in described


def test_a_private_run_trains_on_features_centred_on_its_release(tmp_path, monkeypatch):
    monkeypatch.setenv("OPU_HAL_CACHE", str(tmp_path))
    trainer = Trainer(_config(), data=tiny_images_dataset(), progress=False, log=quiet)
    mean = trainer.centering.mean
    uncentred = Trainer(_config(center_features=False), data=tiny_images_dataset(), progress=False, log=quiet)
    assert torch.allclose(uncentred.data.test.x - mean, trainer.data.test.x, atol=1e-5)
    exact = uncentred.train_split.x.mean(dim=0)
    error = (mean - exact).norm() / math.sqrt(mean.numel())  # z R / n per coordinate: 20 * 63 / 40
    assert 0.5 * 31.5 < float(error) < 1.5 * 31.5


def test_a_non_private_run_centres_on_the_exact_mean(tmp_path, monkeypatch):
    monkeypatch.setenv("OPU_HAL_CACHE", str(tmp_path))
    trainer = Trainer(_config(method="bp", target_epsilon=None), data=tiny_images_dataset(), progress=False, log=quiet)
    assert trainer.accountant is None and trainer.centering.event is None
    assert float(trainer.train_split.x.mean(dim=0).abs().max()) < 1e-4


def test_a_resumed_run_keeps_the_mean_its_ledger_paid_for(tmp_path, monkeypatch):
    monkeypatch.setenv("OPU_HAL_CACHE", str(tmp_path / "cache"))
    path = str(tmp_path / "ck.pt")
    first = Trainer(_config(epochs=2, checkpoint=path), data=tiny_images_dataset(), progress=False, log=quiet)
    first.run(max_epochs=1)
    first.release()
    resumed = Trainer(
        _config(epochs=2, checkpoint=path, resume=True), data=tiny_images_dataset(), progress=False, log=quiet
    )
    assert torch.equal(resumed.centering.mean, first.centering.mean)
    assert torch.allclose(resumed.data.test.x, first.data.test.x, atol=1e-5)
    assert [e.event for e in resumed.accountant.ledger] == [e.event for e in first.accountant.ledger]
    resumed.release()


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"features": "pixels"}, "--center-features applies to --features scatter"),
        ({"centering_noise": 0.5}, r"--centering-noise must be in \[1, 10000\], got 0.5"),
    ],
)
def test_bad_centering_settings_are_refused_naming_the_flag(changes, message):
    with pytest.raises(TrainingConfigError, match=message):
        _config(**changes)
