"""Canaries through the real pipeline (issue 44): training rows drawn by the run's own sampler and
summed by its centring release, scored by the likelihood ratio under the accounted law. The zoo's
sampler and centring bugs, out of reach of canaries planted after both, raise the audit's bound."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tests import test_audit_zoo as zoo
from tests.test_scattering import tiny_images_dataset
from tests.training_helpers import SMALL_DIGITS_AUDIT, cli_argv, clusters
from trainers.audit import audit_white_box
from trainers.audit.likelihood import step_llr
from trainers.audit.pipeline import PipelineCanaries
from trainers.core.data import Split

CANARIES = 300


def _sampler_config():
    # dp-sgd, Poisson batches of 50 from 200 rows plus the canaries' (public size 500): 10 steps an epoch.
    return zoo._config("dp-sgd", batch_size=50, epochs=3)


def _audit(config, data, **kw):
    return audit_white_box(config, canaries=CANARIES, data=data, **kw)


def test_every_example_in_every_batch_raises_the_pipeline_bound_above_the_claim(monkeypatch):
    zoo._every_example_in_every_batch(monkeypatch)
    result = _audit(_sampler_config(), clusters(**zoo.DATA))
    assert result["canary_mode"] == "pipeline" and result["steps"] == 30
    assert result["epsilon_lower_bound"] > result["claimed_epsilon"], result["by_score_kind"]
    assert result["flagged"] and "epsilon_lower_bound > claimed_epsilon" in result["findings"]


def test_centring_without_noise_raises_the_pipeline_bound_above_the_claim(monkeypatch, tmp_path):
    monkeypatch.setenv("OPU_HAL_CACHE", str(tmp_path))
    zoo._centring_without_noise(monkeypatch)
    result = _audit(zoo._centring_config(), tiny_images_dataset())
    assert result["score_kind"] == "centring" and result["correct"] == result["guesses"]
    assert result["epsilon_lower_bound"] > result["claimed_epsilon"] and result["flagged"]


@pytest.mark.parametrize("repeat", range(3))
def test_a_sound_poisson_run_is_never_flagged_by_pipeline_canaries(repeat):
    result = _audit(_sampler_config(), clusters(**zoo.DATA))
    assert not result["flagged"], result["findings"]
    assert "likelihood" in result["by_score_kind"]
    assert result["gdp_epsilon_estimate"] <= result["claimed_epsilon"]


def test_a_sound_replace_one_run_is_never_flagged_by_pipeline_canaries():
    result = _audit(zoo._config("dp-dfa", batch_size=50, epochs=2), clusters(**zoo.DATA))
    assert result["canary_magnitude"] == pytest.approx(result["measured_sensitivity"] / 2)
    assert "twin" in result["canary_sampling"] and not result["flagged"], result["findings"]


def test_a_sound_centred_run_is_not_flagged_and_its_centring_is_scored(monkeypatch, tmp_path):
    monkeypatch.setenv("OPU_HAL_CACHE", str(tmp_path))
    result = _audit(zoo._centring_config(), tiny_images_dataset())
    assert "centring" in result["by_score_kind"] and not result["flagged"], result["findings"]


def test_add_remove_canaries_are_rows_only_when_heads_and_leave_the_batch_they_are_drawn_in():
    planted = PipelineCanaries.draw(50, replace_one=False)
    base = Split(torch.randn(20, 8), torch.zeros(20, dtype=torch.long))
    split = planted.training_split(base)
    assert len(split.x) == 20 + planted.heads.sum()
    owners = planted.rows[planted.rows >= 0].numpy()
    assert planted.heads[owners].all() and len(set(owners)) == len(owners)
    rows = split.x[planted.rows >= 0]  # one feature each, of norm R = sqrt(8)
    assert torch.allclose(rows.norm(dim=1), torch.full((len(rows),), math.sqrt(8)))
    kept = planted.take_out(torch.arange(len(split.x)))
    assert len(kept) == 20 and sorted(planted.sampled.tolist()) == sorted(owners.tolist())


def test_replace_one_canaries_are_all_rows_with_the_twin_of_opposite_sign():
    planted = PipelineCanaries.draw(40, replace_one=True)
    split = planted.training_split(Split(torch.zeros(10, 64), torch.zeros(10, dtype=torch.long)))
    owner = planted.rows
    values = split.x[owner >= 0].sum(dim=1).numpy()
    expected = (planted.feature_signs * planted.coin_signs)[owner[owner >= 0].numpy()] * 8.0
    assert len(split.x) == 50 and np.allclose(values, expected)


def test_the_likelihood_ratio_is_the_linear_filter_at_rate_one_and_the_mixture_below():
    x, v, std = np.array([-1.0, 0.3, 2.0]), np.full(3, 0.5), 1.5
    assert np.allclose(step_llr(x, v, 1.0, std, replace_one=True), 2 * x * v / std**2)
    q = 0.1
    phi = lambda t: np.exp(-(t**2) / (2 * std**2))  # noqa: E731
    direct = np.log(((1 - q) * phi(x) + q * phi(x - v)) / phi(x))
    assert np.allclose(step_llr(x, v, q, std, replace_one=False), direct)
    twin = np.log(((1 - q) * phi(x) + q * phi(x - v)) / ((1 - q) * phi(x) + q * phi(x + v)))
    assert np.allclose(step_llr(x, v, q, std, replace_one=True), twin)


def test_an_unknown_canary_mode_is_refused_naming_the_option():
    with pytest.raises(Exception, match="--canary-mode 'sideways'"):
        audit_white_box(_sampler_config(), canaries=10, data=clusters(**zoo.DATA), canary_mode="sideways")


# Full-batch runs stay full-batch (batch n + m): the base update is public, the rest of each release
# is noise whose law the ``empirical`` score estimates from the coordinates no canary owns.
WRONG_LAW = [
    ("Rademacher noise of the right std", zoo._rademacher_noise),
    ("Gaussian noise rounded to multiples of its std", zoo._rounded_noise),
]


@pytest.mark.parametrize("name, plant", WRONG_LAW, ids=[w[0] for w in WRONG_LAW])
def test_noise_of_the_right_std_and_the_wrong_law_raises_the_bound_of_a_full_batch_run(monkeypatch, name, plant):
    plant(monkeypatch)
    result = _audit(zoo._config("dp-dfa"), clusters(**zoo.DATA))
    assert result["sampling_rate"] == 1 and result["score_kind"] == "empirical"
    assert result["epsilon_lower_bound"] > result["claimed_epsilon"] and result["flagged"], name


@pytest.mark.parametrize("method, repeat", [("dp-dfa", 0), ("dp-dfa", 1), ("dp-sgd", 0)])
def test_a_sound_full_batch_run_is_never_flagged_by_the_empirical_law(method, repeat):
    result = _audit(zoo._config(method), clusters(**zoo.DATA))
    assert result["sampling_rate"] == 1 and "empirical" in result["by_score_kind"]
    assert not result["flagged"], result["findings"]


def test_cli_audit_canary_mode_picks_the_mode_and_the_record_says_which(tmp_path):
    import json

    from opu_hal.cli import main

    for mode in ("update", "pipeline"):
        out = tmp_path / f"{mode}.json"
        main(
            cli_argv(
                "audit", **SMALL_DIGITS_AUDIT, batch_size="200", epochs="1", canaries="200", canary_mode=mode, out=out
            )
        )
        record = json.loads(out.read_text())
        assert record["canary_mode"] == mode and record["canary_sampling"].startswith("pipeline") == (
            mode == "pipeline"
        )
