"""Camera figures from a datasheet: the frame time and sensor size that price a privacy mechanism's
camera time (DESIGN.md, "What a mechanism costs the device").

LightOn's OPUs read speckle with a 2.2-megapixel global-shutter machine-vision camera; lightonml's
simulated device reports an output region of 2040 x 1088 pixels, which is the CMOSIS CMV2000's
2048 x 1088 array less 8 columns. The figures below are that sensor's, from

    CMOSIS, "CMV2000 v2 Datasheet, 2.2 Megapixel machine vision CMOS image sensor",
    reference CMV2000-datasheet-v2.13 (2014):
    2048 x 1088 pixels of 5.5 x 5.5 um, global shutter; 340 frames/s at full resolution with
    10-bit output over 16 LVDS channels; the 12-bit read-out mode runs at 70 frames/s.

The CMV2000 reads rows, so a region of all 1088 rows takes the full-frame time whatever its width.
lightonml's own 500 us frame time is its simulated device's default, not a camera specification.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CameraDatasheet:
    """A camera's cited figures: sensor size, frame rates by bit depth, and where they come from."""

    model: str
    citation: str
    columns: int
    rows: int
    pixel_pitch_um: float
    fps_by_bits: tuple[tuple[int, float], ...]  # (largest bit depth, full-frame rate), ascending

    @property
    def pixels(self) -> int:
        return self.columns * self.rows

    def full_frame_fps(self, adc_bits: int) -> float:
        """The full-frame rate at ``adc_bits``: the first mode that outputs at least that many bits."""
        for bits, fps in self.fps_by_bits:
            if adc_bits <= bits:
                return fps
        modes = ", ".join(f"{bits} bits" for bits, _ in self.fps_by_bits)
        raise ValueError(f"adc_bits = {adc_bits}: the {self.model} reads out at most {modes}")

    def frame_time_us(self, adc_bits: int) -> float:
        """One full frame's period, microseconds."""
        return 1e6 / self.full_frame_fps(adc_bits)


CMV2000 = CameraDatasheet(
    model="CMOSIS CMV2000",
    citation="CMOSIS CMV2000 v2 datasheet (CMV2000-datasheet-v2.13, 2014): 2048 x 1088 pixels, "
    "5.5 um, 340 fps at 10 bits, 70 fps at 12 bits, full frame",
    columns=2048,
    rows=1088,
    pixel_pitch_um=5.5,
    fps_by_bits=((10, 340.0), (12, 70.0)),
)
