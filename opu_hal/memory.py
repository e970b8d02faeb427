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
