"""``opu-hal tune``'s clock does not tell K (issue 44, item 2): the tuning's wall time and the times of
the files it writes are the same for the smallest and the largest K the secret draw can give."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from opu_hal.privacy import Accountant, PoissonGaussianEvent
from tests.training_helpers import cli_argv
from trainers.run.config import TrainConfig

#: Seconds a fake candidate takes per epoch: the fake's time is its shape's, as a real run's is.
PER_EPOCH_S = 0.01
#: Uniforms for K's draw (the first uniform of the secret generator): K = 1, and the largest K.
SMALLEST, LARGEST = 0.0, 1 - 1e-12


class FixedUniforms:
    """The secret-randomness hook: the first uniform draws K, the others pick candidates."""

    def __init__(self, first: float) -> None:
        self.first: float | None = first

    def uniform(self, n: int) -> Any:
        import numpy as np

        if self.first is not None:
            first, self.first = self.first, None
            return np.full(n, first)
        return np.linspace(0.05, 0.95, n)


def fake_train(cache: Path, calls: list[TrainConfig]):
    """A trainer whose duration is its config's shape (epochs) and that writes a feature cache the
    first time it runs (as ``--features scatter`` does), then returns a private run's record."""

    def train(config: TrainConfig, **_: Any) -> dict[str, Any]:
        calls.append(config)
        if not cache.exists():
            cache.write_bytes(b"features")
        time.sleep(PER_EPOCH_S * config.epochs)
        ledger = Accountant("add_remove")
        ledger.step(PoissonGaussianEvent(0.02, 2.0), 50)
        return {
            "method": config.method,
            "profile": None,
            "privacy": {"ledger": ledger.to_dict()},
            "dataset": {"name": "fake", "train": 2500},
            "epochs": [],
            "noise_reports": [],
            "final": {
                "delta": config.delta,
                "validation_accuracy": config.lr,
                "test_accuracy": 0.5,
                "epochs_completed": config.epochs,
                "wall_time_s": 0.0,
            },
        }

    return train


def run_tuning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, uniform: float) -> tuple[float, float, int]:
    """``opu-hal tune --out`` with K's uniform fixed: (wall time, out mtime - cache mtime, train calls)."""
    import trainers.cli.tune
    import trainers.run.loop
    from trainers.cli import main

    folder = tmp_path / f"u{uniform}"
    folder.mkdir()
    calls: list[TrainConfig] = []
    monkeypatch.setattr(trainers.run.loop, "train", fake_train(folder / "features.pt", calls))
    monkeypatch.setattr(trainers.cli.tune, "SecureGenerator", lambda: FixedUniforms(uniform))
    began = time.perf_counter()
    options = dict(method="dp-sgd", dataset="digits", epochs=3, noise_multiplier=2, delta="1e-5", space="lr=0.1,0.2")
    assert main(cli_argv("tune", **options, mean_runs=2, out=folder / "tune.json")) == 0
    wall = time.perf_counter() - began
    dated = (folder / "tune.json").stat().st_mtime - (folder / "features.pt").stat().st_mtime
    return wall, dated, len(calls)


def test_the_tuning_takes_the_same_time_and_dates_its_files_alike_for_the_smallest_and_largest_k(
    tmp_path, monkeypatch, capsys
):
    """Tolerance: a factor 1.5. Every slot trains (sleeps) whatever K is, so the two tunings differ
    only by scheduling noise, a few per cent of a sleep-dominated interval even on a loaded machine;
    a tuning whose time followed K would differ by (K_max + 1) / (K_min + 1) >= 5 here (K ~ geometric,
    mean 2: K_max >= 9 at the largest uniform without truncation)."""
    wall_small, dated_small, calls_small = run_tuning(tmp_path, monkeypatch, SMALLEST)
    wall_large, dated_large, calls_large = run_tuning(tmp_path, monkeypatch, LARGEST)
    capsys.readouterr()
    assert calls_small == calls_large
    assert max(wall_small, wall_large) / min(wall_small, wall_large) < 1.5
    assert max(dated_small, dated_large) / min(dated_small, dated_large) < 1.5


def test_tune_refuses_checkpoints_whose_file_times_would_date_the_candidates():
    from opu_hal.privacy.tuning import TruncatedNegativeBinomial
    from trainers.cli.tune import parse_space, tune
    from trainers.core.errors import TrainingConfigError

    config = TrainConfig.for_method("dp-sgd", dataset="digits", noise_multiplier=2.0, checkpoint="run.ckpt")
    with pytest.raises(TrainingConfigError, match="--checkpoint"):
        tune(
            config,
            parse_space(["lr=0.1"]),
            TruncatedNegativeBinomial.with_mean(2, 1.0),
            lambda c: pytest.fail("no candidate may run"),
        )
