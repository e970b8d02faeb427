"""What a device can do, declared as data so trainers adapt without ``isinstance`` checks."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

InputKind = Literal["binary", "ternary", "real"]
OutputKind = Literal["linear", "intensity"]


@dataclass(frozen=True)
class Capabilities:
    """Declared abilities of a device.

    ``input_kind``: ``binary`` accepts only 0/1 entries (a DMD), ``ternary`` accepts -1/0/1,
    ``real`` accepts any finite value. ``output_kind``: ``linear`` returns ``B x``,
    ``intensity`` returns ``|B x|^2``. ``max_in_features`` / ``max_out_features`` are the
    hardware limits (``None``: bounded only by memory). ``noise_settable``: the noise level can
    be changed at run time (software noise, temperature, exposure). ``privacy_noise``: the device
    can serve as a privacy-noise source (:meth:`opu_hal.Device.draw_privacy_counts`).
    """

    input_kind: InputKind
    output_kind: OutputKind
    max_in_features: int | None
    max_out_features: int | None
    temperature_settable: bool
    noise_settable: bool = False
    compute_device: str = "cpu"
    privacy_noise: bool = False

    def accepts(self, kind: InputKind) -> bool:
        """Whether inputs of ``kind`` can be projected in one pass."""
        order = {"binary": 0, "ternary": 1, "real": 2}
        return order[kind] <= order[self.input_kind]

    def to_dict(self) -> dict[str, object]:
        return asdict(self)
