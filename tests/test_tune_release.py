"""``opu-hal tune --release best-candidate``: Algorithm 1's own output (the selected candidate's run)
published with no final run, so the total is the tuning's epsilon alone, and each run's noise is
planned for that total."""

from __future__ import annotations

from typing import Any

import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

from opu_hal.privacy import Accountant, PoissonGaussianEvent
from opu_hal.privacy.tuning import FixedRuns, PoissonRuns, TruncatedNegativeBinomial, tnb_tuning_rdp
from tests.test_tune_command import FixedUniforms, base, config_steps, fake_record, run_small_tune
from trainers.cli.tune import parse_space, summary, tune
from trainers.run.config import TrainConfig

LAW = TruncatedNegativeBinomial.with_mean(4, 1.0)


def labelled(configs: list[TrainConfig]):
    """A fake trainer whose record's test accuracy names the candidate (twice its lr)."""

    def fake(config: TrainConfig) -> dict[str, Any]:
        configs.append(config)
        record = fake_record(config)
        record["final"]["test_accuracy"] = 2 * config.lr
        return record

    return fake


def per_run() -> Accountant:
    run = Accountant("add_remove")
    run.step(PoissonGaussianEvent(0.01, 2.0), 100)  # fake_record's ledger
    return run


def test_the_selected_candidates_own_run_is_published_and_no_final_run_trains():
    configs: list[TrainConfig] = []
    record = tune(base(), {"lr": [0.1, 0.2, 0.3]}, FixedRuns(2), labelled(configs), release="best-candidate")
    assert len(configs) == 2  # the two candidates, nothing after them
    best = max(c.lr for c in configs)
    tuning, published = record["tuning"], record["final_run"]
    assert tuning["selected"] == {"lr": best} and tuning["release"] == "best-candidate"
    assert published["final"]["test_accuracy"] == 2 * best  # that candidate's record, not a retrained one
    assert tuning["final_run_epsilon"] is None
    composed = Accountant("add_remove")
    composed.step(PoissonGaussianEvent(0.01, 2.0), 200)  # two runs, no third
    assert tuning["total_epsilon"] == pytest.approx(composed.get_epsilon(1e-5), rel=1e-9)
    assert "the selected candidate's run test accuracy" in summary(record)
    assert "total, the tuning alone" in summary(record)


def test_without_a_final_run_the_total_is_theorem_2_alone_and_below_the_final_runs():
    released = tune(base(), parse_space(["lr=0.1,0.2"]), LAW, fake_record, release="best-candidate")
    retrained = tune(base(), parse_space(["lr=0.1,0.2"]), LAW, fake_record)
    run = per_run()
    expected = rdp_lib.compute_epsilon(run.orders, tnb_tuning_rdp(run.orders, run.rdp, LAW), 0.9e-5)[0]
    assert released["tuning"]["total_epsilon"] == pytest.approx(expected, rel=1e-12)
    assert released["tuning"]["total_epsilon"] == pytest.approx(released["tuning"]["tuning_epsilon"], rel=1e-12)
    assert released["tuning"]["total_epsilon"] < retrained["tuning"]["total_epsilon"]


def test_k_zero_releases_nothing():
    """Under Poisson K = 0 selects nothing: with no final run there is no run to publish."""
    configs: list[TrainConfig] = []
    law = PoissonRuns(3.0)
    record = tune(
        base(), parse_space(["lr=0.1,0.3"]), law, labelled(configs), FixedUniforms(0.01), release="best-candidate"
    )
    assert record["final_run"] is None and record["tuning"]["selected"] is None
    assert len(configs) == record["tuning"]["slots"]
    assert "no run is released" in summary(record)


def test_noise_for_total_without_a_final_run_plans_less_noise_that_still_fits():
    from trainers.cli.tune_budget import conversion_delta, noise_for_total, total_epsilon_at

    start = base(target_epsilon=None, noise_multiplier=1.0)
    alone = noise_for_total(start, LAW, 3.0, final_run=False)
    with_final = noise_for_total(start, LAW, 3.0)
    z = alone.noise_multiplier
    assert z is not None and with_final.noise_multiplier is not None and z < with_final.noise_multiplier
    q, steps, delta = 50 / 1294, 2 * config_steps(alone), conversion_delta(LAW, 1e-5)

    def event(noise: float) -> PoissonGaussianEvent:
        return PoissonGaussianEvent(q, noise)

    assert total_epsilon_at(event, steps, "add_remove", LAW, z, delta, final_run=False) <= 3.0
    assert total_epsilon_at(event, steps, "add_remove", LAW, z * (1 - 3e-4), delta, final_run=False) > 3.0


def test_tune_command_releases_the_best_candidate_within_the_total(tmp_path, capsys):
    record = run_small_tune(
        tmp_path, total_epsilon="2", k_distribution="fixed", mean_runs="2", release="best-candidate"
    )
    tuning = record["tuning"]
    assert tuning["release"] == "best-candidate" and tuning["final_run_epsilon"] is None
    assert 1.9 < tuning["total_epsilon"] <= 2.0 and record["final_run"]["final"]["test_accuracy"] is not None
    assert "the selected candidate's run: " in capsys.readouterr().out
