"""``opu-hal plan`` reads the calibration, the camera physics and the anchor map without importing torch
(2-3 s of its time at the main job's scale): they use torch only in annotations."""

from __future__ import annotations

import subprocess
import sys

_PROBE = "import sys, opu_hal.calibration.plan_command, opu_hal.calibration.calibrated; print('torch' in sys.modules)"


def test_the_plan_command_modules_do_not_import_torch() -> None:
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
