"""The CMV2000 frame rates the plan prices camera time at, against the datasheet's own frame-rate formula
(opu_hal/camera/datasheet.py: 12-bit mode at 40 MHz over 4 outputs, 10-bit at 48 MHz over 16)."""

from __future__ import annotations

import math

import pytest

from opu_hal.camera.datasheet import CMV2000, readout_frame_time_us


def test_the_12_bit_full_frame_rate_is_the_formulas_rounded_down():
    derived_fps = 1e6 / readout_frame_time_us(40.0, 4, CMV2000.rows)
    assert derived_fps == pytest.approx(70.96, abs=0.005)
    assert CMV2000.full_frame_fps(12) == math.floor(derived_fps)  # priced on the slower side


def test_the_10_bit_full_frame_rate_agrees_with_the_formula_within_one_percent():
    derived_fps = 1e6 / readout_frame_time_us(48.0, 16, CMV2000.rows)
    assert derived_fps == pytest.approx(338.27, abs=0.005)
    assert abs(CMV2000.full_frame_fps(10) / derived_fps - 1) < 0.01  # 0.51 %


def test_a_formula_input_out_of_range_is_refused_naming_the_allowed_values():
    with pytest.raises(ValueError, match=r"outputs in \(1, 2, 4, 8, 16\)"):
        readout_frame_time_us(40.0, 3, 1088)
