"""The speckle anchor's drift checks are camera time: the frames the watch reads are counted in the plan's
and the record's camera frames and seconds, one every ``anchor_check_every`` draws, the first included."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from opu_hal.contract.anchor_map import drift_check_frames
from tests.test_speckle_anchor import draw, measured_map, small_device
from trainers.run.record import camera_time


@pytest.mark.parametrize("draws, every", [(7, 3), (6, 3), (1, 25), (5, 2)])
def test_the_frames_counted_are_the_checks_the_watch_made(draws: int, every: int) -> None:
    device = small_device(anchor_check_every=every)
    bounds = measured_map(device, frames=16)
    for _ in range(draws):
        last = draw(device, bounds, 500, 1000.0).distribution
    assert len(device.speckle.checks) == last.anchor_checks == drift_check_frames(draws, every)


def test_no_draw_reads_no_check_frame_and_bad_arguments_name_themselves() -> None:
    assert drift_check_frames(0, 25) == 0
    with pytest.raises(ValueError, match="check_every >= 1"):
        drift_check_frames(3, 0)


def test_the_record_adds_the_drift_check_frames_at_the_frame_period() -> None:
    per_step = {"frames": 6, "camera_seconds": 6 * 0.01429, "anchor_check_every": 25}
    trainer = SimpleNamespace(
        method=SimpleNamespace(describe=lambda: {"device_noise": per_step}),
        global_step=520,
        run_journal=SimpleNamespace(lost_steps_charged=0),
    )
    found = camera_time(trainer)
    assert found["camera_frames"] == 6 * 520 + 21  # checks at draws 0, 25, ..., 500
    assert found["camera_seconds"] == pytest.approx((6 * 520 + 21) * 0.01429)
