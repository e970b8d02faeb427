"""Why a LightOn device draws no privacy noise, in words a user can act on.

lightonml 1.4.3 returns projections, and raw frames through ``OPU.transform``; it shows no anchor
pattern alone, so no anchor-only read (the photo-electrons that privacy noise is drawn from) can be
taken through it. Its simulated device (``simulated = true``) has no camera at all: it computes float32
projections, so there is nothing to draw, and nothing is faked. A recorded calibration still plans the
camera's noise (:mod:`opu_hal.calibration.recorded_plan`): accounting needs the measured law only.
"""

from __future__ import annotations

from ..contract.errors import DeviceUnavailable
from .lighton_profile import LightonProfile

PLAN_HINT = "`opu-hal plan --profile PROFILE --mechanism digitized` accounts it from the recorded calibration"


def no_privacy_reads(profile: LightonProfile, calibrated: bool) -> DeviceUnavailable:
    """The refusal of device privacy noise on ``profile`` (module docstring), naming why and what would serve."""
    label = profile.label
    if profile.simulated:
        return DeviceUnavailable(
            f"profile {label!r} (lighton, simulated = true): lightonml's simulated device computes float32 "
            "projections without a camera: no photo-electron or DN reads to serve as a privacy-noise source "
            "(none is faked). Device noise needs a LightOn OPU whose SDK returns anchor-only raw reads and a "
            "calibration of its camera: pass --calibration FILE (or the profile key 'calibration'), written by "
            "`opu-hal calibrate PROFILE --frames-dir DIR` from frames recorded with lightonml (docs/own-camera.md); "
            "here, train with --noise-source software"
        )
    if not calibrated:
        return DeviceUnavailable(
            f"profile {label!r} (lighton): digitized privacy noise on a real camera is accounted from its measured "
            "law only; pass --calibration FILE (Python: calibration=FILE), a calibration of this camera: `opu-hal "
            "calibrate PROFILE --frames-dir DIR` on frames recorded with lightonml (docs/own-camera.md)"
        )
    return DeviceUnavailable(
        f"profile {label!r} (lighton): lightonml 1.4.3 shows no anchor pattern alone, so no anchor-only read can be "
        f"drawn as privacy noise; {PLAN_HINT}, but a run needs those reads: use --noise-source software"
    )
