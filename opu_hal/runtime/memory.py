"""How much memory this process can still get, to refuse an allocation before attempting it.

The host's free memory is not the whole answer: a process under ``ulimit -v`` (``RLIMIT_AS``) or
in a memory-limited cgroup (a container, a batch job) fails long before the host runs out. The
answer is the least of the three headrooms.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

from ..contract.errors import HostMemoryError

MEMINFO = "/proc/meminfo"
SELF_STATUS = "/proc/self/status"
CGROUP_ROOT = Path("/sys/fs/cgroup")


def host_available_bytes() -> int:
    """Available host memory (``MemAvailable`` of ``/proc/meminfo``; else free pages x page size)."""
    try:
        with open(MEMINFO) as file:
            for line in file:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def _status_bytes(key: str) -> int | None:
    """A ``kB`` field of ``/proc/self/status`` (``VmSize``: the address space in use), in bytes."""
    try:
        with open(SELF_STATUS) as file:
            for line in file:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def address_space_headroom() -> int | None:
    """Bytes of address space left under ``RLIMIT_AS`` (None when unlimited or unknown)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    used = _status_bytes("VmSize") or 0
    return max(0, soft - used)


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max" (v2) or unreadable: no limit


def cgroup_headroom(root: Path = CGROUP_ROOT, membership: Path = Path("/proc/self/cgroup")) -> int | None:
    """Bytes left under this process's cgroup memory limit, v2 or v1 (None when unlimited/unknown)."""
    try:
        lines = membership.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, rel = (line.split(":", 2) + ["", ""])[:3]
        rel = rel.lstrip("/")
        if controllers == "":  # v2 unified hierarchy
            limit, current = _read_int(root / rel / "memory.max"), _read_int(root / rel / "memory.current")
        elif "memory" in controllers.split(","):
            base = root / "memory" / rel
            limit, current = _read_int(base / "memory.limit_in_bytes"), _read_int(base / "memory.usage_in_bytes")
        else:
            continue
        if limit is not None and limit < 1 << 60:  # v1 reports "no limit" as a huge number
            return max(0, limit - (current or 0))
    return None


def available_bytes() -> int:
    """Memory this process can still allocate: the least of the host's available memory, the
    address space left under ``RLIMIT_AS`` and the room left under its cgroup's limit."""
    limits = [host_available_bytes(), address_space_headroom(), cgroup_headroom()]
    return min(v for v in limits if v is not None)


def gib(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:.3g} GiB"


def row_bytes(in_features: int, out_features: int, peak_factor: float) -> int:
    """Peak bytes of one projected row: ``peak_factor`` float32 copies of its input and output."""
    return int(peak_factor * 4 * (in_features + out_features))


def batch_limit(in_features: int, out_features: int, peak_factor: float) -> int:
    """Rows whose projection fits in half the available memory (at least 1)."""
    return max(1, int(available_bytes() // 2 // row_bytes(in_features, out_features, peak_factor)))


def check_rows_fit(rows: int, in_features: int, out_features: int, peak_factor: float, label: str) -> None:
    """Refuse a projection of ``rows`` rows whose peak (``peak_factor`` float32 copies of each row's
    input and output) exceeds half the memory available now."""
    need = rows * row_bytes(in_features, out_features, peak_factor)
    left = available_bytes()
    if need > left // 2:
        raise HostMemoryError(
            f"a batch of {rows} rows needs about {gib(need)} to project on {label!r}; "
            f"{gib(left)} is available (half of it may be used): project fewer rows per call"
        )
