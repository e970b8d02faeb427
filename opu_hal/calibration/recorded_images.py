"""Image files of recorded frames: ``.npy`` (numpy), ``.png``, ``.tif`` / ``.tiff`` and ``.pgm`` (Pillow,
which matplotlib already requires), one monochrome frame per file, integer DN in ``[0, 2^bits - 1]``.

Every refusal names the file and what was allowed: an unknown extension, a colour image, a frame
whose shape differs from the first one's, values that are not integers or exceed the bit depth.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..contract.errors import CalibrationError
from .frames import SeriesStats

IMAGE_SUFFIXES = (".npy", ".png", ".tif", ".tiff", ".pgm")


def read_frame(path: Path, bits: int) -> np.ndarray:
    """One frame as float64 DN, checked against ``bits``."""
    suffix = path.suffix.lower()
    if suffix not in IMAGE_SUFFIXES:
        raise CalibrationError(f"{path}: unknown image type {suffix!r}; allowed: {', '.join(IMAGE_SUFFIXES)}")
    try:
        if suffix == ".npy":
            raw = np.load(path, allow_pickle=False)
        else:
            from PIL import Image

            with Image.open(path) as image:
                if image.mode not in ("L", "I", "I;16", "I;16B", "I;16L", "F"):
                    raise CalibrationError(
                        f"{path}: image mode {image.mode!r} is not monochrome; record raw monochrome frames "
                        "(8-bit 'L' or 16-bit 'I;16' PNG/TIFF, or .npy)"
                    )
                raw = np.asarray(image)
    except CalibrationError:
        raise
    except (OSError, ValueError) as exc:
        raise CalibrationError(f"{path}: cannot read the frame: {exc}") from None
    frame = np.asarray(raw, dtype=np.float64)
    if frame.ndim not in (1, 2) or frame.size == 0:
        raise CalibrationError(f"{path}: a frame is a 1-d or 2-d monochrome array, got shape {raw.shape}")
    top = (1 << bits) - 1
    if not np.all(np.isfinite(frame)) or np.any(frame != np.round(frame)):
        raise CalibrationError(f"{path}: frames hold integer DN; this one has non-integer or non-finite values")
    low, high = float(frame.min()), float(frame.max())
    if low < 0 or high > top:
        raise CalibrationError(
            f"{path}: values {low:g}..{high:g} DN lie outside [0, {top}] of bit_depth {bits}; "
            "give the camera's bit depth (an image container's depth is not the ADC's)"
        )
    return frame


def read_series(
    files: Sequence[Path],
    bits: int,
    exposure_us: float,
    temperature_c: float,
    photons: float,
    kind: str,
    shape: tuple[int, ...] | None = None,
    power: float | None = None,
) -> SeriesStats:
    """The per-pixel mean and temporal variance (``ddof = 1``) of ``files`` (two frames at least), all of
    the ``shape`` given (else the first frame's); ``photons`` 0 marks none known. The frames are streamed
    (sums of differences from the first frame), so memory does not grow with their number."""
    if len(files) < 2:
        raise CalibrationError(
            f"{files[0] if files else '(no files)'}: a series needs two frames at least (a variance), got {len(files)}"
        )
    top = (1 << bits) - 1
    first = read_frame(files[0], bits)
    if shape is not None and first.shape != shape:
        raise CalibrationError(f"{files[0]}: frame shape {first.shape} differs from the others' {shape}")
    total, squares, clipped = np.zeros(first.size), np.zeros(first.size), int((first >= top).sum())
    for path in files[1:]:
        frame = read_frame(path, bits)
        if frame.shape != first.shape:
            raise CalibrationError(f"{path}: frame shape {frame.shape} differs from the others' {first.shape}")
        step = (frame - first).ravel()
        total += step
        squares += step * step
        clipped += int((frame >= top).sum())
    n = len(files)
    return SeriesStats(
        kind=kind,
        temperature_c=float(temperature_c),
        exposure_us=float(exposure_us),
        frames=n,
        mean=first.ravel() + total / n,
        var=np.maximum(squares - total * total / n, 0.0) / (n - 1),
        photons_per_pixel=float(photons) if photons else None,
        anchor_power_uw=power,
        clipped=clipped,
        max_dn=top,
        reads_at_top=clipped,
    )
