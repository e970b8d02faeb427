"""scripts/reproduce/mac_noise.py: DP-MAC's noise multiplier for a whole run with learned bounds
(paper 003, section 2.4), the histograms and the pre-training epoch on the same ledger."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from opu_hal.privacy import Accountant, ComposedEvent, GaussianEvent, PoissonGaussianEvent
from scripts.reproduce.mac_noise import MacRun, mac_noise_multiplier, mac_run_epsilon, mac_steps, main

ROOT = Path(__file__).resolve().parent.parent


def _run_epsilon(z: float, train: int, batch: int, epochs: int, delta: float) -> float:
    """The ledger a DP-MAC run with ``bounds=histogram`` charges (trainers/methods/dp_mac.py)."""
    ledger = Accountant("add_remove")
    ledger.step(PoissonGaussianEvent(batch / train, z), mac_steps(train, batch, epochs, 1))
    ledger.step(ComposedEvent(tuple(GaussianEvent(20.0) for _ in range(3))))
    return ledger.get_epsilon(delta)


def test_the_noise_multiplier_spends_the_target_with_the_histograms_charged() -> None:
    z = mac_noise_multiplier(1.0, 1e-5, train=2000, batch=50, epochs=2)
    assert _run_epsilon(z, 2000, 50, 2, 1e-5) == pytest.approx(1.0, rel=2e-3)
    assert _run_epsilon(z, 2000, 50, 2, 1e-5) <= 1.0 + 1e-9
    assert _run_epsilon(0.97 * z, 2000, 50, 2, 1e-5) > 1.0


def test_steps_count_the_pretraining_epoch_as_the_sampler_does() -> None:
    assert mac_steps(train=54000, batch=50, epochs=20, pretrain_epochs=1) == 21 * 1080


def test_a_batch_larger_than_the_training_split_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="--batch 60: must be in"):
        mac_noise_multiplier(1.0, 1e-5, train=50, batch=60, epochs=1)


@pytest.mark.parametrize(
    "name", ["paper000_mnist", "paper002_conv", "paper003_mnist", "paper003_fixed", "paper004_mnist", "paper004_c1"]
)
def test_the_table_scripts_parse(name: str) -> None:
    result = subprocess.run(["bash", "-n", str(ROOT / "scripts" / "reproduce" / f"{name}.sh")], capture_output=True)
    assert result.returncode == 0, result.stderr.decode()


def test_the_command_line_refuses_a_non_positive_epsilon(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["0", "--train", "100"])
    assert exit_info.value.code == 2 and "epsilon 0.0: must be > 0" in capsys.readouterr().err


def test_spent_prints_the_epsilon_of_the_run_at_the_printed_sigma(capsys: pytest.CaptureFixture[str]) -> None:
    main(["1", "--train", "2000", "--epochs", "2", "--spent"])
    z_text, spent_text = capsys.readouterr().out.split()
    z = float(z_text)
    assert float(spent_text) == pytest.approx(_run_epsilon(z, 2000, 50, 2, 1e-5), rel=1e-9)
    assert float(spent_text) == mac_run_epsilon(z, 1e-5, MacRun(2000, 50, 2))
    assert float(spent_text) <= 1.0 + 1e-4  # z rounded to 6 digits: within a hair of the target
