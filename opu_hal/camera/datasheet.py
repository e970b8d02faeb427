"""Camera figures from a datasheet: the frame time and sensor size that price a privacy mechanism's
camera time (DESIGN.md, "What a mechanism costs the device").

LightOn's OPUs read speckle with a 2.2-megapixel global-shutter machine-vision camera; lightonml's
simulated device reports an output region of 2040 x 1088 pixels, which is the CMOSIS CMV2000's
2048 x 1088 array less 8 columns. The figures below are that sensor's, from

    CMOSIS, "CMV2000 v2 Datasheet, 2.2 Megapixel machine vision CMOS image sensor",
    reference CMV2000-datasheet-v2.13 (2014):
    2048 x 1088 pixels of 5.5 x 5.5 um, global shutter; 340 frames/s at full resolution with
    10-bit output over 16 LVDS channels; the 12-bit read-out mode runs at 70 frames/s.

The 12-bit figure, derived from the datasheet's own frame-rate formula (its frame-rate section, p. 15 in
rev 3.8), with the exposure overlapping the read-out (:func:`readout_frame_time_us`):

    image read-out time = 129 x master clock period x 16 / outputs used x rows
    frame overhead time = (fot_length + 2 x 16 / outputs used) x 129 x master clock period, fot_length = 10

The master clock runs at 5-48 MHz and each LVDS output carries 10 or 12 bits per clock (10 or 12 x the
master clock, at most 480 Mbit/s), so 12-bit words allow at most 40 MHz; the 12-bit read-out mode has
no 16- or 8-output configuration (change record, issue 2.9.1: "removed 16 and 8 outputs"), so at most
4 outputs. At 40 MHz over 4 outputs a full frame of 1088 rows takes 14.035 ms + 58 us = 14.093 ms:
70.96 frames/s, which the datasheet's 70 frames/s rounds down (the plan keeps 70: 1.4 % more camera
time, the slower side). The 10-bit mode at 48 MHz over 16 outputs gives 2.956 ms: 338.3 frames/s
against the stated 340 (0.5 %). Sources read: the v2.13 change record (pdfslide.net transcript of
CMV2000-datasheet-v2.13) and the formula and clock limits as quoted from the datasheet (rev 3.8,
p. 15) in dstockhouse/eaglesat-plugsin, documents/cmv2000_notes.md. Not read: the v2.13 pages that
state 70 frames/s and the 12-bit mode's clock limit themselves.

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


def readout_frame_time_us(clock_mhz: float, outputs: int, rows: int, fot_length: int = 10) -> float:
    """The CMV2000 datasheet's frame period [us] with the exposure overlapping the read-out: the image
    read-out time ``129 t 16 / outputs x rows`` plus the frame overhead ``(fot_length + 2 x 16 / outputs) 129 t``,
    ``t`` the master clock period (module docstring)."""
    if not (clock_mhz > 0 and outputs in (1, 2, 4, 8, 16) and rows >= 1 and fot_length >= 0):
        raise ValueError(
            f"clock_mhz > 0, outputs in (1, 2, 4, 8, 16), rows >= 1 and fot_length >= 0 are needed; got "
            f"{clock_mhz}, {outputs}, {rows}, {fot_length}"
        )
    period_us = 1.0 / clock_mhz
    return 129 * period_us * 16 / outputs * rows + (fot_length + 2 * 16 / outputs) * 129 * period_us


CMV2000 = CameraDatasheet(
    model="CMOSIS CMV2000",
    citation="CMOSIS CMV2000 v2 datasheet (CMV2000-datasheet-v2.13, 2014): 2048 x 1088 pixels, "
    "5.5 um, 340 fps at 10 bits, 70 fps at 12 bits, full frame (12 bits: 40 MHz over 4 outputs, 70.96 fps by its "
    "frame-rate formula)",
    columns=2048,
    rows=1088,
    pixel_pitch_um=5.5,
    fps_by_bits=((10, 340.0), (12, 70.0)),
)
