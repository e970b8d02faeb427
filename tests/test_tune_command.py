"""``opu-hal tune`` (trainers/cli/tune.py): K from the secure generator, selection on the validation
score, one per-run ledger, the published record, and the total epsilon recomputed independently."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

from opu_hal.privacy import Accountant, PoissonGaussianEvent
from opu_hal.privacy.tuning import (
    PoissonRuns,
    TruncatedNegativeBinomial,
    poisson_tuning_rdp,
    sample_within,
    tnb_tuning_rdp,
    truncation_delta,
)
from tests.training_helpers import cli_argv
from trainers.cli.tune import parse_space, summary, tune
from trainers.core.errors import TrainingConfigError
from trainers.run.config import TrainConfig
from trainers.run.loop import train

LAW = TruncatedNegativeBinomial.with_mean(4, 1.0)


class FixedUniforms:
    """Stands in for the secure generator where a test must fix K: the first uniform draws K."""

    def __init__(self, first: float) -> None:
        self.values = [first]

    def uniform(self, n: int) -> np.ndarray:
        out = np.array([self.values.pop(0)] if self.values else np.linspace(0.05, 0.95, n))
        return out[:n] if len(out) >= n else np.resize(out, n)


def fake_record(config: TrainConfig, noise: float = 2.0) -> dict[str, Any]:
    accountant = Accountant("add_remove")
    accountant.step(PoissonGaussianEvent(0.01, noise), 100)
    return {
        "method": config.method,
        "privacy": {"ledger": accountant.to_dict()},
        "dataset": {"name": "fake"},
        "epochs": [],
        "noise_reports": [],
        "final": {"delta": config.delta, "validation_accuracy": config.lr, "test_accuracy": 0.5},
    }


def recording(configs: list[TrainConfig]) -> Callable[[TrainConfig], dict[str, Any]]:
    """A fake trainer that appends each config it is given to ``configs``."""

    def fake(config: TrainConfig) -> dict[str, Any]:
        configs.append(config)
        return fake_record(config)

    return fake


def tune_dp_sgd_on_digits(**options: object) -> int:
    """The exit status of ``opu-hal tune --method dp-sgd --dataset digits`` with ``options``."""
    from trainers.cli import main

    return main(cli_argv("tune", method="dp-sgd", dataset="digits", **options))


def run_small_tune(tmp_path: Path, **options: str) -> dict[str, Any]:
    """``opu-hal tune`` of DP-SGD on 100 digits (one epoch, lr 0.1 or 0.2) with ``options`` added;
    asserts it exits 0 and returns the record it wrote with ``--out``."""
    out = tmp_path / "tune.json"
    small = dict(epochs=1, batch_size=50, hidden=16, delta="1e-5", space="lr=0.1,0.2", train_limit=100)
    assert tune_dp_sgd_on_digits(**small, **options, out=out) == 0
    return json.loads(out.read_text())


def base(**kw: Any) -> TrainConfig:
    settings = dict(dataset="digits", epochs=2, batch_size=50, hidden=(16,), target_epsilon=2.0, delta=1e-5)
    settings.update(kw)
    return TrainConfig.for_method("dp-sgd", **settings)


def test_all_slots_plus_the_final_one_are_trained_and_the_best_of_the_first_k_is_selected():
    configs: list[TrainConfig] = []
    fake = recording(configs)

    record = tune(base(), parse_space(["lr=0.1,0.3,0.2"]), LAW, fake, generator=FixedUniforms(0.9))
    slots = record["tuning"]["slots"]
    runs = sample_within(LAW, slots, 0.9)
    assert 1 < runs < slots and len(configs) == slots + 1
    tried = [c.lr for c in configs[:runs]]
    assert record["tuning"]["selected"] == {"lr": max(tried)} and configs[-1].lr == max(tried)
    assert record["tuning"]["selected_validation_accuracy"] == max(tried)


def test_the_record_publishes_neither_k_nor_the_other_candidates():
    """Theorem 2 covers the best candidate only: publishing K or another score would void it."""
    record = tune(base(), parse_space(["lr=0.1,0.3"]), LAW, fake_record, generator=FixedUniforms(0.99))
    assert set(record["tuning"]) == {
        "procedure",
        "release",
        "distribution",
        "eta",
        "gamma",
        "mean_runs",
        "search_space",
        "selected",
        "selected_validation_accuracy",
        "score",
        "per_run_epsilon",
        "tuning_epsilon",
        "final_run_epsilon",
        "total_epsilon",
        "delta",
        "secret",
        "slots",
        "truncation_tail",
        "delta_conversion",
        "timing",
    }
    assert set(record) == {"method", "tuning", "final_run"}


def test_total_epsilon_is_theorem_2_composed_with_the_final_run_and_delta_pays_the_truncation():
    record = tune(base(), parse_space(["lr=0.1"]), LAW, fake_record)
    run = Accountant("add_remove")
    run.step(PoissonGaussianEvent(0.01, 2.0), 100)
    total = tnb_tuning_rdp(run.orders, run.rdp, LAW) + run.rdp
    expected = rdp_lib.compute_epsilon(run.orders, total, 0.9e-5)[0]  # the conversion's share of delta
    assert record["tuning"]["total_epsilon"] == pytest.approx(expected, rel=1e-12)
    slots = record["tuning"]["slots"]
    assert record["tuning"]["delta"] == truncation_delta(LAW, slots, expected, 0.9e-5) <= 1e-5
    assert truncation_delta(LAW, slots - 1, expected, 0.9e-5) > 1e-5
    assert record["tuning"]["per_run_epsilon"] < record["tuning"]["tuning_epsilon"] < record["tuning"]["total_epsilon"]


def test_candidates_with_different_ledgers_are_refused():
    noises = iter([2.0, 3.0] * 50)
    with pytest.raises(TrainingConfigError, match="different ledgers"):
        tune(
            base(), parse_space(["lr=0.1"]), LAW, lambda c: fake_record(c, next(noises)), generator=FixedUniforms(0.99)
        )


@pytest.mark.parametrize("pair", ["epochs=1,2", "noise_multiplier=1,2", "lr", "lr=", "opt.min_batch=3"])
def test_search_keys_that_could_change_privacy_or_malformed_are_refused(pair):
    with pytest.raises(TrainingConfigError, match="--space"):
        parse_space([pair])


def test_a_ledger_holding_a_claim_is_refused():
    record = fake_record(base())
    record["privacy"] = None
    with pytest.raises(TrainingConfigError, match="not private"):
        tune(base(), parse_space(["lr=0.1"]), LAW, lambda c: record)


def test_explicit_slots_below_what_delta_allows_are_refused():
    with pytest.raises(TrainingConfigError, match="--slots 2"):
        tune(base(), parse_space(["lr=0.1"]), LAW, fake_record, slots=2)


def test_tune_end_to_end_on_digits_with_secure_k():
    record = tune(
        base(train_limit=100),
        parse_space(["lr=0.05,0.2", "clip_norm=1"]),
        TruncatedNegativeBinomial.with_mean(1.1, 1.0),
        lambda c: train(c, progress=False, log=lambda m: None),
    )
    tuning = record["tuning"]
    assert tuning["final_run_epsilon"] <= 2.0 and tuning["total_epsilon"] > tuning["final_run_epsilon"]
    assert tuning["selected"]["lr"] in (0.05, 0.2)
    assert "train_loss" not in record["final_run"]["epochs"][-1]  # the final run's record is the public one
    assert tuning["slots"] >= 2 and tuning["delta"] <= 1e-5 < tuning["delta"] / 0.9


def test_tune_command_prints_and_records_the_total_epsilon(tmp_path, capsys):
    saved = run_small_tune(tmp_path, target_epsilon="1", mean_runs="1.1")
    printed = capsys.readouterr().out
    assert f"total with the final run {saved['tuning']['total_epsilon']:.4g}" in printed
    assert saved["tuning"]["total_epsilon"] > 1.0 >= saved["tuning"]["final_run_epsilon"]


# -- K ~ Poisson (Theorem 6) --------------------------------------------------------------------
POISSON = PoissonRuns(3.0)


def test_poisson_k_zero_selects_nothing_and_the_final_run_takes_the_command_line_settings():
    """K = 0 (the first uniform below e^-mu): no candidate runs, Algorithm 1 outputs nothing; the
    tuning is still charged Theorem 6 on the final run's per-run curve."""
    configs: list[TrainConfig] = []
    fake = recording(configs)

    record = tune(base(lr=0.07), parse_space(["lr=0.1,0.3"]), POISSON, fake, generator=FixedUniforms(0.01))
    slots = record["tuning"]["slots"]
    assert sample_within(POISSON, slots, 0.01) == 0
    assert len(configs) == slots + 1 and configs[-1].lr == 0.07  # every slot trains, none is selected
    tuning = record["tuning"]
    assert tuning["selected"] is None and tuning["selected_validation_accuracy"] is None
    assert tuning["distribution"].startswith("Poisson") and tuning["mu"] == 3.0 and "eta" not in tuning
    run = Accountant("add_remove")
    run.step(PoissonGaussianEvent(0.01, 2.0), 100)
    total = poisson_tuning_rdp(run.orders, run.rdp, POISSON) + run.rdp
    assert tuning["total_epsilon"] == pytest.approx(rdp_lib.compute_epsilon(run.orders, total, 0.9e-5)[0], rel=1e-12)
    assert "selected nothing (K = 0" in summary(record)


def test_poisson_k_runs_select_the_best_and_charge_theorem_6():
    configs: list[TrainConfig] = []
    fake = recording(configs)

    record = tune(base(), parse_space(["lr=0.1,0.3,0.2"]), POISSON, fake, generator=FixedUniforms(0.95))
    slots = record["tuning"]["slots"]
    runs = sample_within(POISSON, slots, 0.95)
    assert runs >= 5 and len(configs) == slots + 1
    assert record["tuning"]["selected"] == {"lr": max(c.lr for c in configs[:runs])}
    run = Accountant("add_remove")
    run.step(PoissonGaussianEvent(0.01, 2.0), 100)
    total = rdp_lib._compute_rdp_repeat_and_select(run.orders, run.rdp, 3.0, np.inf) + run.rdp  # independent code
    assert record["tuning"]["total_epsilon"] == pytest.approx(
        rdp_lib.compute_epsilon(run.orders, total, 0.9e-5)[0], rel=1e-9
    )
    assert "K ~ Poisson, mean 3" in summary(record)


def test_tune_command_with_poisson_k(tmp_path, capsys):
    saved = run_small_tune(tmp_path, target_epsilon="1", k_distribution="poisson", mean_runs="1")["tuning"]
    assert saved["distribution"].startswith("Poisson") and saved["mu"] == 1.0
    assert saved["total_epsilon"] > 1.0 >= saved["final_run_epsilon"]
    assert "K ~ Poisson, mean 1" in capsys.readouterr().out
    assert tune_dp_sgd_on_digits(target_epsilon="1", space="lr=0.1", k_distribution="poisson", mean_runs="0.5") != 0
    assert "mu must be in [1" in capsys.readouterr().err


# -- --total-epsilon: each run's noise planned for the tuning's total -------------------------------
def test_noise_for_total_is_the_smallest_noise_whose_tuning_and_final_run_fit():
    from trainers.cli.tune_budget import conversion_delta, noise_for_total, total_epsilon_at

    law = TruncatedNegativeBinomial.with_mean(3, 1.0)
    config = noise_for_total(base(target_epsilon=None, noise_multiplier=1.0), law, 3.0)
    assert config.target_epsilon is None and config.noise_multiplier is not None
    z, q = config.noise_multiplier, 50 / 1294  # digits: 1294 training examples after the validation split
    steps = 2 * config_steps(config)

    def event(noise: float) -> PoissonGaussianEvent:
        return PoissonGaussianEvent(q, noise)

    delta = conversion_delta(law, 1e-5)
    assert total_epsilon_at(event, steps, "add_remove", law, z, delta) <= 3.0
    assert total_epsilon_at(event, steps, "add_remove", law, z * (1 - 3e-4), delta) > 3.0


def test_noise_for_total_pays_for_a_released_feature_mean(tmp_path, monkeypatch):
    from trainers.cli.tune_budget import noise_for_total

    monkeypatch.setenv("OPU_HAL_CACHE", str(tmp_path))
    law = TruncatedNegativeBinomial.with_mean(3, 1.0)
    plain = base(target_epsilon=None, noise_multiplier=1.0, features="scatter", hidden=(), inputs="unit")
    centred = replace(plain, center_features=True, centering_noise=8.0)
    assert (
        noise_for_total(centred, law, 3.0).noise_multiplier > 1.01 * noise_for_total(plain, law, 3.0).noise_multiplier
    )


def config_steps(config: TrainConfig) -> int:
    from trainers.run.loop import Trainer

    with Trainer(config, progress=False, log=lambda m: None) as trainer:
        return trainer.sampler.steps_per_epoch


def test_tune_command_with_a_total_epsilon_spends_at_most_it(tmp_path):
    tuning = run_small_tune(tmp_path, total_epsilon="2", mean_runs="1.1")["tuning"]
    assert tuning["total_epsilon_target"] == 2.0
    assert 1.9 < tuning["total_epsilon"] <= 2.0 and tuning["final_run_epsilon"] < 1.5 and tuning["delta"] <= 1e-5


def test_what_the_candidates_print_does_not_depend_on_k(capfd):
    """Each candidate plans its noise (a line on stderr) and may warn: none of it may leave the
    process, or counting the lines would publish K."""
    printed = []
    law = TruncatedNegativeBinomial.with_mean(1.1, 1.0)
    for first in (0.0, 1 - 1e-12):  # K = 1, then K = slots
        k_runs: list[int] = []

        def counted(config: TrainConfig, k_runs: list[int] = k_runs) -> dict[str, Any]:
            k_runs.append(1)
            return train(config, progress=True, log=lambda m: print(m, file=__import__("sys").stderr))

        record = tune(
            base(epochs=1, train_limit=100), parse_space(["lr=0.1"]), law, counted, generator=FixedUniforms(first)
        )
        printed.append((len(k_runs), sample_within(law, record["tuning"]["slots"], first), capfd.readouterr()))
    (runs_a, k_a, out_a), (runs_b, k_b, out_b) = printed
    assert k_a == 1 < k_b and runs_a == runs_b  # different K, the same candidate slots trained
    # Only the final run speaks (its numbers differ between the two tunings, its lines do not).
    assert out_a.out == out_b.out == ""
    # the final run's chance warning depends on its released test accuracy, not on K: left out of the count
    assert len(spoken(out_a.err)) == len(spoken(out_b.err))
    assert out_a.err.count("choosing the noise multiplier") == out_b.err.count("choosing the noise multiplier") == 1


def test_tune_refuses_a_run_without_a_validation_split():
    with pytest.raises(TrainingConfigError, match="validation-fraction 0"):
        tune(
            base(validation_fraction=0.0),
            parse_space(["lr=0.05,0.2"]),
            TruncatedNegativeBinomial.with_mean(2, 1.0),
            lambda c: pytest.fail("no candidate may run"),
        )


def test_a_fixed_k_trains_exactly_its_candidates_publishes_k_and_spends_their_composition():
    from opu_hal.privacy.tuning import FixedRuns

    configs: list[TrainConfig] = []
    record = tune(base(), {"lr": [0.1, 0.2, 0.3]}, FixedRuns(2), recording(configs))
    t = record["tuning"]
    assert len(configs) == 3 and t["slots"] == 2 and t["runs"] == 2
    assert t["delta"] == pytest.approx(1e-5) and t["delta_conversion"] == pytest.approx(1e-5)
    assert "K," not in t["secret"]
    per_run = Accountant("add_remove")
    per_run.step(PoissonGaussianEvent(0.01, 2.0), 100)
    composed = Accountant("add_remove")
    composed.step(PoissonGaussianEvent(0.01, 2.0), 300)
    assert t["total_epsilon"] == pytest.approx(composed.get_epsilon(1e-5), rel=1e-9)
    assert "K = 2, public" in summary(record)


def test_tune_command_refuses_a_fractional_fixed_k(capsys):
    assert tune_dp_sgd_on_digits(noise_multiplier="2", space="lr=0.1,0.2", k_distribution="fixed", mean_runs="2.5") == 2
    assert "--mean-runs 2.5: with --k-distribution fixed" in capsys.readouterr().err


def spoken(err: str) -> list[str]:
    """The lines of ``err`` other than the final run's chance warning (a released metric's function)."""
    return [line for line in err.splitlines() if "is at or below chance" not in line]
