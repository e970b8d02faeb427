"""Calibration: measure a device's camera noise (photon transfer, EMVA 1288), keep it in a
versioned file, and map a privacy target to an operating point.

Modules: :mod:`.frames` (acquisition), :mod:`.photon_transfer` (gain, read noise, dark signal,
saturation, quantum efficiency; with :mod:`.dark_lines`, :mod:`.clip_level` and :mod:`.bootstrap`),
:mod:`.temperature` (dark current against temperature),
:mod:`.schema` (the file), :mod:`.calibrated` (a device's noise report from a calibration),
:mod:`.plan` (operating points for a target), :mod:`.run` (the whole measurement),
:mod:`.recorded` (the same from recorded frames: :func:`.recorded.calibrate_frames_dir`, with
:mod:`.recorded_manifest` and :mod:`.recorded_images`; :mod:`.export_frames` records a device's frames),
:mod:`.read_box` (the calibrated law of one read the digitized privacy route accounts with).
The camera formulas it evaluates live in :mod:`opu_hal.camera.physics`, below it and the backends.
"""
