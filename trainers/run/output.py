"""The result record of a run (JSON) and atomic file writes."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from opu_hal import NoiseReport


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte of ``data`` is written (a short write is continued, an error raised)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` so that ``path`` holds either the old or the new content, never a mix."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: str | os.PathLike[str], record: dict[str, Any]) -> None:
    write_atomic(path, (json.dumps(record, indent=2, allow_nan=True) + "\n").encode())


class NoiseLog:
    """The noise reports a run saw, grouped by operating point (``std`` varies with the signal on
    a shot-noise device, so each group keeps its range), with how many projections each covers."""

    def __init__(self, entries: list[dict[str, Any]] | None = None) -> None:
        self.entries: list[dict[str, Any]] = [dict(e) for e in entries or []]

    def add(self, report: NoiseReport | None) -> None:
        if report is None:
            return
        data = report.to_dict()
        key = {k: data[k] for k in ("std_lower", "source", "temperature_c", "exposure_us", "passes")}
        for entry in self.entries:
            if entry["operating_point"] == key:
                entry["count"] += 1
                entry["std_min"] = min(entry["std_min"], report.std)
                entry["std_max"] = max(entry["std_max"], report.std)
                return
        self.entries.append({"operating_point": key, "count": 1, "std_min": report.std, "std_max": report.std})

    def to_list(self) -> list[dict[str, Any]]:
        return [dict(entry) for entry in self.entries]
