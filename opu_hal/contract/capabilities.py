"""What a device can do, declared as data so trainers adapt without ``isinstance`` checks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Literal

InputKind = Literal["binary", "ternary", "real"]
OutputKind = Literal["linear", "intensity"]
#: A run-time option's allowed closed range and unit: ``(low, high, unit)``.
OptionRange = tuple[float, float, str]


@dataclass(frozen=True)
class Capabilities:
    """Declared abilities of a device.

    ``input_kind``: ``binary`` accepts only 0/1 entries (a DMD), ``ternary`` accepts -1/0/1,
    ``real`` accepts any finite value. ``output_kind``: ``linear`` returns ``B x``,
    ``intensity`` returns ``|B x|^2``. ``max_in_features`` / ``max_out_features`` are the
    hardware limits (``None``: bounded only by memory). ``settable``: the run-time options
    :meth:`opu_hal.Device.set_options` accepts, each with its allowed ``(low, high, unit)``
    (e.g. ``{"temperature_c": (-10.0, 85.0, "C")}``); the profile's bounds, read at build time. ``privacy_noise``: the
    device can serve as a privacy-noise source (:meth:`opu_hal.Device.draw_privacy_counts`).
    ``max_batch``: the most rows one :meth:`~opu_hal.Device.project` call takes by the hardware's
    own limit (``None``: unbounded; host memory is checked per call, not declared here).
    ``raw_frames``: :meth:`~opu_hal.Device.raw_frames` gives camera frames (what calibration measures).
    ``calibratable``: :meth:`~opu_hal.Device.attach_calibration` accepts a calibration.
    ``digitized_noise``: the device draws privacy noise as sums of digitized camera reads at any gain
    (:meth:`~opu_hal.Device.draw_digitized_counts`), accounted exactly from
    :meth:`~opu_hal.Device.digitized_read_law`.
    """

    input_kind: InputKind
    output_kind: OutputKind
    max_in_features: int | None
    max_out_features: int | None
    settable: Mapping[str, OptionRange] = field(default_factory=dict)
    compute_device: str = "cpu"
    privacy_noise: bool = False
    max_batch: int | None = None
    raw_frames: bool = False
    calibratable: bool = False
    digitized_noise: bool = False

    @property
    def temperature_settable(self) -> bool:
        """Whether ``set_options(temperature_c=...)`` is accepted."""
        return "temperature_c" in self.settable

    @property
    def noise_settable(self) -> bool:
        """Whether any run-time option changes the noise level (software noise, temperature)."""
        return bool(self.settable)

    def accepts(self, kind: InputKind) -> bool:
        """Whether inputs of ``kind`` can be projected in one pass."""
        order = {"binary": 0, "ternary": 1, "real": 2}
        return order[kind] <= order[self.input_kind]

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["settable"] = {name: list(bounds) for name, bounds in self.settable.items()}
        data["temperature_settable"] = self.temperature_settable
        data["noise_settable"] = self.noise_settable
        return data
