"""Parsers for the text formats of /proc files: text in, values out, no I/O.

Each raises InputError naming the file and line when the text is not what the
kernel writes, so a hand-made fake tree with a typo fails clearly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from oomguard.errors import InputError
from oomguard.numbers import input_int
from oomguard.units import KiB, parse_size

# The kernel prints unsigned 64-bit counters; a kB figure past 2**53 would be over 8 EiB of
# bytes, and anything longer than oomguard.numbers.MAX_CHARS digits is refused before int().
_KB_MAX = 1 << 53
_COUNT_MAX = (1 << 64) - 1


def _kernel_int(text: str, source: str, line: int | None, field: str, hi: int = _COUNT_MAX) -> int:
    return input_int(text, field=field, file=source, line=line, lo=0, hi=hi)

__all__ = [
    "MemInfo",
    "SwapArea",
    "parse_meminfo",
    "parse_swaps",
    "parse_limits_nofile",
    "parse_shm_mount",
    "parse_node_meminfo",
]


@dataclass(frozen=True)
class MemInfo:
    mem_total_bytes: int
    mem_available_bytes: int
    mem_free_bytes: int
    swap_total_bytes: int
    swap_free_bytes: int
    commit_limit_bytes: int | None
    committed_as_bytes: int | None
    available_estimated: bool  # True on kernels without MemAvailable (< 3.14)


@dataclass(frozen=True)
class SwapArea:
    filename: str
    kind: str  # partition / file
    size_bytes: int
    used_bytes: int
    priority: int


_MEMINFO_LINE = re.compile(r"^([A-Za-z0-9_()]+):\s+(\d+)(?:\s+kB)?\s*$")


def _kv_kib(text: str, source: str) -> dict[str, int]:
    values: dict[str, int] = {}
    for no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        m = _MEMINFO_LINE.match(line.strip())
        if not m:
            raise InputError(f"not a meminfo line: {line.strip()[:60]!r}", file=source, line=no)
        key, number = m.groups()
        # Values with a kB unit are KiB; unit-less ones (HugePages_Total) are counts.
        if line.rstrip().endswith("kB"):
            values[key] = _kernel_int(number, source, no, key, _KB_MAX) * KiB
        else:
            values[key] = _kernel_int(number, source, no, key)
    return values


def parse_meminfo(text: str, source: str = "/proc/meminfo") -> MemInfo:
    v = _kv_kib(text, source)
    if "MemTotal" not in v:
        raise InputError("no MemTotal line", file=source)
    estimated = "MemAvailable" not in v
    available = v.get("MemAvailable")
    if available is None:
        # Pre-3.14 kernels: free plus page cache is the usual approximation.
        available = v.get("MemFree", 0) + v.get("Cached", 0) + v.get("Buffers", 0)
    return MemInfo(
        mem_total_bytes=v["MemTotal"],
        mem_available_bytes=available,
        mem_free_bytes=v.get("MemFree", available),
        swap_total_bytes=v.get("SwapTotal", 0),
        swap_free_bytes=v.get("SwapFree", 0),
        commit_limit_bytes=v.get("CommitLimit"),
        committed_as_bytes=v.get("Committed_AS"),
        available_estimated=estimated,
    )


def read_available_ram(path: str = "/proc/meminfo") -> tuple[int, str]:
    """Host RAM a new server can use: MemAvailable, else MemTotal (``--host-ram-gib auto``)."""
    from oomguard.inputs import files

    info = parse_meminfo(files.read_text(path, limit=files.PROC_BYTES, what="host memory"), path)
    if info.available_estimated:
        return info.mem_total_bytes, f"MemTotal in {path}"
    return info.mem_available_bytes, f"MemAvailable in {path}"


def parse_node_meminfo(text: str, source: str) -> tuple[int | None, int | None]:
    """MemTotal and MemFree of a NUMA node's meminfo ('Node 0 MemTotal:  123 kB')."""
    total = free = None
    for no, line in enumerate(text.splitlines(), start=1):
        m = re.match(r"^Node\s+\d+\s+(MemTotal|MemFree):\s+(\d+)\s*kB", line.strip())
        if m:
            value = _kernel_int(m.group(2), source, no, m.group(1), _KB_MAX) * KiB
            if m.group(1) == "MemTotal":
                total = value
            else:
                free = value
    return total, free


def parse_swaps(text: str, source: str = "/proc/swaps") -> tuple[SwapArea, ...]:
    areas = []
    for no, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("Filename"):
            continue
        cells = line.split()
        if len(cells) < 5:
            raise InputError(f"expected 5 columns, found {len(cells)}", file=source, line=no)
        size = _kernel_int(cells[2], source, no, "swap Size", _KB_MAX)
        used = _kernel_int(cells[3], source, no, "swap Used", _KB_MAX)
        prio = input_int(cells[4], field="swap Priority", file=source, line=no, lo=-(1 << 31), hi=1 << 31)
        # Paths with spaces are escaped by the kernel (\040), so cells[0] is whole.
        areas.append(SwapArea(cells[0], cells[1], size * KiB, used * KiB, prio))
    return tuple(areas)


def parse_limits_nofile(text: str, source: str = "/proc/self/limits") -> tuple[int | None, int | None]:
    """Soft and hard 'Max open files' of /proc/PID/limits (None means unlimited)."""
    for no, line in enumerate(text.splitlines(), start=1):
        if line.startswith("Max open files"):
            cells = line[len("Max open files") :].split()
            if len(cells) < 2:
                raise InputError("'Max open files' has no soft/hard values", file=source, line=no)
            return _limit(cells[0], source, no), _limit(cells[1], source, no)
    raise InputError("no 'Max open files' line", file=source)


def _limit(cell: str, source: str, line: int) -> int | None:
    if cell == "unlimited":
        return None
    return _kernel_int(cell, source, line, "Max open files")


def parse_shm_mount(text: str, mem_total_bytes: int, source: str = "/proc/mounts") -> int | None:
    """Size of the /dev/shm tmpfs from /proc/mounts, or None when nothing is mounted there.

    tmpfs without ``size=`` gets half of RAM; ``size=`` takes k/m/g suffixes
    (binary) or a percentage of RAM.
    """
    size: int | None = None
    for no, line in enumerate(text.splitlines(), start=1):
        cells = line.split()
        if len(cells) < 4 or cells[1] != "/dev/shm":
            continue
        options = dict(
            (opt.split("=", 1) + [""])[:2] for opt in cells[3].split(",")
        )
        raw = options.get("size")
        if not raw:
            size = mem_total_bytes // 2
        elif raw.endswith("%"):
            size = mem_total_bytes * input_int(raw[:-1], field="tmpfs size=%", file=source, line=no, lo=0, hi=1 << 20) // 100
        else:
            try:
                # mount(8) suffixes are binary whatever their case.
                size = parse_size(raw.upper())
            except ValueError:
                raise InputError(f"bad tmpfs size option {raw!r}", file=source, line=no) from None
        # The last mount at a path hides the earlier ones; keep looping.
    return size
