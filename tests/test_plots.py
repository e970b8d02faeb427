"""The figures a reviewer reads numbers off (issue 50): the calibration's photon-transfer curve and
dark-current law, training curves on a fixed accuracy axis with the chance level, and a ``plan --plot``
figure for every mechanism ``plan`` accepts.

``tests/data/plots/opu-unity-cal.json`` was written by ``opu-hal calibrate tests/data/plots/opu-unity.toml
--temperatures 0 40 80 --exposures 100000 --dark-exposures 1000000 --frames 8 --out
tests/data/plots/opu-unity-cal.json`` (a real calibration: calibrating here would take half a minute)."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.collections import PolyCollection

from opu_hal.calibration.figure_panels import (
    DARK_AXES,
    DARK_BAND,
    DARK_LAW,
    PTC_AXES,
    PTC_FIT,
    draw_dark_current_law,
    draw_photon_transfer,
    law_band,
)
from opu_hal.calibration.schema import read_calibration
from opu_hal.calibration.temperature import law_rate
from opu_hal.cli import build_parser, main
from trainers.cli.plot import CHANCE_GID, EPSILON_AXES_GID, plot_records

DATA = Path(__file__).parent / "data" / "plots"
PROFILE, CALIBRATION = DATA / "opu-unity.toml", DATA / "opu-unity-cal.json"
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def calibration():
    return read_calibration(CALIBRATION)


@pytest.fixture
def axes():
    figure, ax = plt.subplots()
    yield ax
    plt.close(figure)


def by_gid(items, gid):
    found = [item for item in items if item.get_gid() == gid]
    assert len(found) == 1, f"one artist with gid {gid!r}, got {len(found)}"
    return found[0]


# -- calibration figure ---------------------------------------------------------------------------
def test_calibration_file_keeps_the_photon_transfer_sweep(calibration):
    points = calibration.photon_transfer_curve
    assert points is not None and len(points) == calibration.illumination_levels
    assert sum(p.in_fit for p in points) >= 3


def test_ptc_line_slope_is_one_over_the_calibrated_gain(calibration, axes):
    draw_photon_transfer(axes, calibration)
    assert axes.get_gid() == PTC_AXES and axes.get_xscale() == axes.get_yscale() == "log"
    x, y = (np.asarray(v, dtype=float) for v in by_gid(axes.get_lines(), PTC_FIT).get_data())
    slope = (y[-1] - y[0]) / (x[-1] - x[0])
    assert slope == pytest.approx(1 / calibration.gain_e_per_dn.value, rel=1e-9)
    intercept = y[0] - slope * x[0]
    read_dn = calibration.read_noise_e.value / calibration.gain_e_per_dn.value
    assert intercept == pytest.approx(read_dn**2 + 1 / 12, rel=1e-9)
    assert "(DN^2)" in axes.get_ylabel() and "(DN)" in axes.get_xlabel()


def test_ptc_marks_saturation_and_the_clip_level(calibration, axes):
    draw_photon_transfer(axes, calibration)
    g = calibration.gain_e_per_dn.value
    vertical = [line.get_xdata()[0] for line in axes.get_lines() if len(set(line.get_xdata())) == 1]
    assert vertical == pytest.approx([calibration.saturation_point_e.value / g, calibration.saturation_e.value / g])
    measured = [line for line in axes.get_lines() if line.get_marker() == "o"]
    assert sum(len(line.get_xdata()) for line in measured) == len(calibration.photon_transfer_curve)


def test_dark_current_panel_draws_the_fitted_law_with_its_interval_band(calibration, axes):
    draw_dark_current_law(axes, calibration)
    assert axes.get_gid() == DARK_AXES and axes.get_yscale() == "log"
    law = calibration.temperature_law
    x, y = by_gid(axes.get_lines(), DARK_LAW).get_data()
    assert y[0] == pytest.approx(law_rate(law, float(x[0])))
    band = by_gid([c for c in axes.collections if isinstance(c, PolyCollection)], DARK_BAND)
    assert band.get_paths()
    low, high = law_band(law, np.asarray(x))
    assert np.all(low < np.asarray(y)) and np.all(np.asarray(y) < high)
    assert "(C)" in axes.get_xlabel() and "e-/s" in axes.get_ylabel()


def test_calibrate_writes_the_figure_with_ptc_and_dark_law_panels(calibration, tmp_path, monkeypatch):
    from opu_hal.calibration import figures
    from opu_hal.profiles.catalogue import load_profile

    drawn = {}
    monkeypatch.setattr(figures, "_save", lambda fig, path: drawn.update(gids={a.get_gid() for a in fig.axes}))
    figures.plot_calibration(calibration, load_profile(PROFILE), tmp_path / "cal.png", None, 1e-5)
    assert {PTC_AXES, DARK_AXES} <= drawn["gids"]


# -- training curves -----------------------------------------------------------------------------
def record(tmp_path: Path, name: str, accuracies: list[float], epsilons: list[float] | None = None) -> str:
    epochs = [
        {"epoch": i + 1, "test_accuracy": a, **({"epsilon": epsilons[i]} if epsilons else {})}
        for i, a in enumerate(accuracies)
    ]
    path = tmp_path / f"{name}.json"
    path.write_text(
        json.dumps(
            {
                "method": name,
                "profile": None,
                "dataset": {"name": "fashion-mnist"},
                "hyperparameters": {},
                "epochs": epochs,
                "final": {"delta": 1e-5} if epsilons else {},
            }
        )
    )
    return str(path)


def drawn_figure(monkeypatch):
    """Keep the figure plot_records saves, for inspection."""
    kept = {}
    original = plt.Figure.savefig

    def savefig(self, *args, **kwargs):
        kept["figure"] = self
        return original(self, *args, **kwargs)

    monkeypatch.setattr(plt.Figure, "savefig", savefig)
    return kept


def test_accuracy_axis_spans_0_to_100_percent_with_a_chance_line(tmp_path, monkeypatch):
    kept = drawn_figure(monkeypatch)
    out = plot_records([record(tmp_path, "dp-dfa", [0.098, 0.101, 0.103])], str(tmp_path / "c.png"))
    assert out.read_bytes()[:8] == PNG
    ax = kept["figure"].axes[0]
    low, high = ax.get_ylim()
    assert low <= 0 and high >= 100
    chance = by_gid(ax.get_lines(), CHANCE_GID)
    assert list(chance.get_ydata()) == pytest.approx([100 / 10] * 2)
    assert chance.get_linestyle() == "--" and "chance" in chance.get_label()
    assert "chance" in [text.get_text().split(",")[0] for text in ax.get_legend().get_texts()]
    assert ax.get_ylabel() == "test accuracy (%)" and kept["figure"].axes[-1].get_xlabel() == "epoch"


def test_classes_option_moves_the_chance_line(tmp_path, monkeypatch):
    kept = drawn_figure(monkeypatch)
    plot_records([record(tmp_path, "dfa", [0.5, 0.6])], str(tmp_path / "c.png"), n_classes=4)
    assert list(by_gid(kept["figure"].axes[0].get_lines(), CHANCE_GID).get_ydata()) == [25.0, 25.0]


def test_records_with_epsilon_get_an_epsilon_panel(tmp_path, monkeypatch):
    kept = drawn_figure(monkeypatch)
    plot_records([record(tmp_path, "dp-dfa", [0.2, 0.4], epsilons=[0.5, 0.8])], str(tmp_path / "c.png"))
    panel = by_gid(kept["figure"].axes, EPSILON_AXES_GID)
    assert list(panel.get_lines()[0].get_ydata()) == [0.5, 0.8] and "epsilon" in panel.get_ylabel()


# -- plan --plot ---------------------------------------------------------------------------------
def mechanisms() -> list[str]:
    """The choices of ``plan --mechanism``, read from the parser."""
    plan = build_parser()._subparsers._group_actions[0].choices["plan"]
    action = next(a for a in plan._actions if "--mechanism" in a.option_strings)
    return list(action.choices)


#: Small runs (seconds each); skellam and digitized need fixed-size batches and a lattice.
RUN = ["--target-epsilon", "8", "--dataset-size", "60000", "--batch-size", "256", "--steps", "10"]
LATTICE = ["--sampling", "fixed", "--dimension", "100", "--lattice-resolution", "20"]
EXTRA = {
    "gaussian": ["--sensitivity", "0.01", "--calibration", str(CALIBRATION)],
    "skellam": [*LATTICE, "--rounding-analysis", "worst-case", "--calibration", str(CALIBRATION)],
    "digitized": [*LATTICE, "--max-reads", "4"],
}


def narrow_gain_calibration(folder: Path) -> Path:
    """The unity calibration with its gain interval narrowed to 1 +- 1e-5 e-/DN, what the Skellam source's
    unity-gain check needs (every gain within 0.5 / full scale of 1); no sweep this small measures it."""
    calibration = read_calibration(CALIBRATION)
    gain = calibration.gain_e_per_dn.model_copy(update={"value": 1.0, "lower": 1 - 1e-5, "upper": 1 + 1e-5})
    path = folder / "narrow-gain-cal.json"
    path.write_text(calibration.model_copy(update={"gain_e_per_dn": gain}).model_dump_json())
    return path


@pytest.mark.parametrize("mechanism", mechanisms())
def test_plan_plot_writes_a_png_for_every_mechanism(mechanism, tmp_path, capsys):
    assert mechanism in EXTRA, f"plan --mechanism {mechanism}: add its run arguments to EXTRA"
    out = tmp_path / f"{mechanism}.png"
    extra = [
        narrow_gain_calibration(tmp_path) if a == str(CALIBRATION) and mechanism == "skellam" else a
        for a in EXTRA[mechanism]
    ]
    code = main(
        ["plan", "--profile", str(PROFILE), "--mechanism", mechanism, *RUN, *map(str, extra), "--plot", str(out)]
    )
    assert code == 0, capsys.readouterr()
    assert out.stat().st_size > 1000 and out.read_bytes()[:8] == PNG


def test_plan_plot_without_a_profile_is_refused(tmp_path, capsys):
    out = tmp_path / "p.png"
    assert main(["plan", *RUN, "--plot", str(out)]) == 2
    assert "--plot needs --profile" in capsys.readouterr().err and not out.exists()
