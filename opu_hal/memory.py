"""How much memory this host can still give, to refuse an allocation before attempting it."""

from __future__ import annotations

import os

MEMINFO = "/proc/meminfo"


def available_bytes() -> int:
    """Available memory (``MemAvailable`` of ``/proc/meminfo``; else physical pages x page size)."""
    try:
        with open(MEMINFO) as file:
            for line in file:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def gib(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:.3g} GiB"


def batch_limit(in_features: int, out_features: int, peak_factor: float) -> int:
    """Rows whose projection fits in half the available memory, when one row peaks at
    ``peak_factor`` float32 copies of its input and output (at least 1)."""
    per_row = peak_factor * 4 * (in_features + out_features)
    return max(1, int(available_bytes() // 2 // per_row))
