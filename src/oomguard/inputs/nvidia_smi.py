"""Parse ``nvidia-smi`` output: the default table and ``--query-gpu ... --format=csv`` series.

Both forms may repeat (``watch nvidia-smi``, ``nvidia-smi -l 1``,
``--query-gpu=... --format=csv -l 1``), so the parser is incremental: feed it
lines with ``NvidiaSmiParser.feed`` and read ``report()`` at the end. Memory is
bounded by the number of samples kept (``max_samples``; older samples are
thinned, the peak and the steps are always kept).

Sizes are bytes (``*_bytes``). nvidia-smi prints MiB.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from oomguard.numbers import float_or_none, int_or_none
from oomguard import lazy_re

MiB = 1 << 20

# |   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |   0 |
_TABLE_GPU = lazy_re.compile(r"^\|\s+(\d+)\s+(.+?)\s+(On|Off)\s+\|\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)?")
# | N/A   34C    P0   113W /  700W |   75000MiB /  81559MiB |   0%   Default |
_TABLE_MEM = lazy_re.compile(r"\|\s*(\d+)\s*MiB\s*/\s*(\d+)\s*MiB\s*\|(?:\s*(\d+)%)?")
# |    0   N/A  N/A     12345      C   python3      74990MiB |   (GI/CI columns optional)
_TABLE_PROC = lazy_re.compile(
    r"^\|\s+(\d+)\s+(?:(?:N/A|\d+)\s+(?:N/A|\d+)\s+)?(\d+)\s+(C\+G|M\+C|C|G|M)\s+(.+?)\s+(\d+|N/A)\s*(?:MiB)?\s*\|"
)
_TABLE_HEADER = lazy_re.compile(r"NVIDIA-SMI\s+([\d.]+)(?:.*Driver Version:\s*([\d.]+))?(?:.*CUDA Version:\s*([\d.]+))?")
_TIMESTAMP_LINE = lazy_re.compile(
    r"^(?:Every [\d.]+s: .*?\s{2,})?(\w{3}\s+\w{3}\s+\d+\s+\d\d:\d\d:\d\d\s+\d{4})\s*$"
)
_CSV_SPLIT = lazy_re.compile(r"\s*,\s*")
_CSV_UNIT = lazy_re.compile(r"^(.*?)\s*\[(.*)\]$")
_NUMBER_UNIT = lazy_re.compile(r"^([-\d.]+)\s*(MiB|GiB|KiB|%|W|MHz)?$")
_CSV_TIMESTAMP = lazy_re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)?$")


@dataclass
class GpuSample:
    """One reading of one GPU."""

    index: int | None = None
    name: str | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    memory_free_bytes: int | None = None
    utilization_pct: float | None = None
    timestamp: str | None = None
    bus_id: str | None = None
    source_line: int | None = None


@dataclass(frozen=True)
class GpuProcess:
    gpu_index: int | None
    pid: int
    name: str
    used_memory_bytes: int | None
    type: str = "C"


@dataclass(frozen=True)
class MemoryStep:
    """A jump in used memory between two consecutive samples of one GPU."""

    gpu_index: int | None
    from_bytes: int
    to_bytes: int
    timestamp: str | None
    source_line: int | None


@dataclass
class GpuSeries:
    """All we keep about one GPU across the samples."""

    index: int | None
    name: str | None = None
    memory_total_bytes: int | None = None
    first: GpuSample | None = None
    last: GpuSample | None = None
    peak: GpuSample | None = None
    num_samples: int = 0
    steps: list[MemoryStep] = field(default_factory=list)


@dataclass
class NvidiaSmiReport:
    form: str  # "table" or "csv"
    driver_version: str | None = None
    cuda_version: str | None = None
    gpus: dict[int, GpuSeries] = field(default_factory=dict)
    processes: list[GpuProcess] = field(default_factory=list)
    num_snapshots: int = 0

    @property
    def peak_used_bytes(self) -> int | None:
        peaks = [g.peak.memory_used_bytes for g in self.gpus.values() if g.peak and g.peak.memory_used_bytes is not None]
        return max(peaks) if peaks else None


# No GPU has 2**40 MiB; a larger cell is not a reading (and would overflow as bytes).
_MAX_MIB = float(1 << 40)


def _mib(text: str) -> int | None:
    """A memory cell ('1234 MiB', '1.5 GiB', '1234') in bytes; None when it is not a reading."""
    text = text.strip()
    m = _NUMBER_UNIT.match(text)
    if not m:
        return None
    unit = m.group(2) or "MiB"
    scale = {"MiB": MiB, "GiB": 1 << 30, "KiB": 1 << 10}.get(unit, MiB)
    value = float_or_none(m.group(1), lo=0, hi=_MAX_MIB * MiB / scale)
    return None if value is None else int(value * scale)


def _small(text: str, hi: int = 1 << 32) -> int | None:
    """A GPU index or a pid as printed; None for what no nvidia-smi prints (5000 digits, '١')."""
    return int_or_none(text, lo=0, hi=hi)


def _pct(text: str) -> float | None:
    return float_or_none(text, lo=0, hi=1000)


class NvidiaSmiParser:
    """Incremental parser; ``form`` is ``"table"``, ``"csv"`` or ``None`` (decide from content)."""

    def __init__(self, form: str | None = None, *, step_min_bytes: int = 1 << 30, max_steps: int = 50):
        self.form = form
        self.step_min_bytes = step_min_bytes
        self.max_steps = max_steps
        self._report = NvidiaSmiReport(form=form or "table")
        self._csv_fields: list[tuple[str, str | None]] | None = None
        self._pending: GpuSample | None = None
        self._in_processes = False
        self._timestamp: str | None = None
        self._seen_pids: set[tuple[int | None, int]] = set()

    # --- feeding -------------------------------------------------------
    def feed(self, line_no: int, line: str) -> None:
        if self.form is None:
            stripped = line.strip()
            if not stripped:
                return
            self.form = "csv" if "," in stripped and not stripped.startswith(("|", "+")) else "table"
            self._report.form = self.form
        if self.form == "csv":
            self._feed_csv(line_no, line)
        else:
            self._feed_table(line_no, line)

    def feed_all(self, lines: Iterable[tuple[int, str]]) -> NvidiaSmiReport:
        for line_no, line in lines:
            self.feed(line_no, line)
        return self.report()

    def report(self) -> NvidiaSmiReport:
        return self._report

    # --- table ---------------------------------------------------------
    def _feed_table(self, line_no: int, line: str) -> None:
        text = line.rstrip()
        m = _TIMESTAMP_LINE.match(text.strip())
        if m:
            self._timestamp = m.group(1)
            return
        m = _TABLE_HEADER.search(text)
        if m:
            self._report.num_snapshots += 1
            self._report.driver_version = m.group(2) or self._report.driver_version
            self._report.cuda_version = m.group(3) or self._report.cuda_version
            self._in_processes = False
            return
        if "Processes:" in text:
            self._in_processes = True
            return
        if self._in_processes:
            m = _TABLE_PROC.match(text)
            if m:
                gpu, pid, kind, name, used = m.groups()
                gpu_i, pid_i = _small(gpu, 1 << 16), _small(pid)
                used_b = None if used == "N/A" else _mib(used)
                if gpu_i is None or pid_i is None:
                    return  # not a row nvidia-smi printed
                key = (gpu_i, pid_i)
                if key not in self._seen_pids and len(self._seen_pids) < 1000:
                    self._seen_pids.add(key)
                    self._report.processes.append(GpuProcess(gpu_i, pid_i, name.strip(), used_b, kind))
            return
        m = _TABLE_GPU.match(text)
        if m and _small(m.group(1), 1 << 16) is not None:
            self._pending = GpuSample(
                index=_small(m.group(1), 1 << 16), name=m.group(2).strip(), bus_id=m.group(4),
                timestamp=self._timestamp, source_line=line_no,
            )
            return
        if self._pending is not None:
            m = _TABLE_MEM.search(text)
            if m:
                sample = self._pending
                self._pending = None
                used, total = _mib(m.group(1)), _mib(m.group(2))
                if used is None or total is None:
                    return  # a hostile figure: not a reading
                sample.memory_used_bytes = used
                sample.memory_total_bytes = total
                sample.memory_free_bytes = total - used
                if m.group(3):
                    sample.utilization_pct = _pct(m.group(3))
                self._add(sample)

    # --- csv -----------------------------------------------------------
    def _feed_csv(self, line_no: int, line: str) -> None:
        text = line.strip()
        if not text:
            return
        cells = _CSV_SPLIT.split(text)
        if self._csv_fields is None or (cells and cells[0] in ("timestamp", "index", "name", "pid")):
            if any(c in ("timestamp", "index", "name", "pid", "uuid") or c.startswith(("memory.", "utilization.", "used_")) for c in cells):
                fields = []
                for c in cells:
                    m = _CSV_UNIT.match(c)
                    fields.append((m.group(1), m.group(2)) if m else (c, None))
                self._csv_fields = fields
                return
            if self._csv_fields is None:
                self._csv_fields = self._guess_fields(cells)
        fields = self._csv_fields
        if not fields or len(cells) != len(fields):
            return
        row = {name: value for (name, _unit), value in zip(fields, cells)}
        if "pid" in row and ("used_gpu_memory" in row or "used_memory" in row):
            used = row.get("used_gpu_memory") or row.get("used_memory") or ""
            pid = _small(row["pid"])
            if pid is None:
                return
            key = (None, pid)
            if key not in self._seen_pids and len(self._seen_pids) < 1000:
                self._seen_pids.add(key)
                self._report.processes.append(GpuProcess(None, pid, row.get("process_name", "?"), _mib(used)))
            return
        sample = GpuSample(timestamp=row.get("timestamp"), name=row.get("name"), source_line=line_no)
        if "index" in row:
            sample.index = _small(row["index"], 1 << 16)
        sample.memory_used_bytes = _mib(row["memory.used"]) if "memory.used" in row else None
        sample.memory_total_bytes = _mib(row["memory.total"]) if "memory.total" in row else None
        sample.memory_free_bytes = _mib(row["memory.free"]) if "memory.free" in row else None
        if sample.memory_used_bytes is None and sample.memory_total_bytes and sample.memory_free_bytes is not None:
            sample.memory_used_bytes = sample.memory_total_bytes - sample.memory_free_bytes
        util = row.get("utilization.gpu")
        if util:
            m = _NUMBER_UNIT.match(util)
            if m:
                sample.utilization_pct = _pct(m.group(1))
        if sample.memory_used_bytes is None and sample.memory_total_bytes is None:
            return
        self._report.num_snapshots += 1
        self._add(sample)

    def _guess_fields(self, cells: list[str]) -> list[tuple[str, str | None]]:
        """``--format=csv,noheader``: name the columns by what their values look like."""
        fields: list[tuple[str, str | None]] = []
        mem_columns = []
        for i, c in enumerate(cells):
            if _CSV_TIMESTAMP.match(c):
                fields.append(("timestamp", None))
            elif c.isdigit() and len(c) <= 2 and not any(f[0] == "index" for f in fields):
                fields.append(("index", None))
            elif c.endswith("MiB") or (c.isdigit() and len(c) > 2):
                mem_columns.append(i)
                fields.append((f"mem{len(mem_columns)}", "MiB"))
            elif c.endswith("%"):
                fields.append(("utilization.gpu", "%"))
            elif any(ch.isalpha() for ch in c):
                fields.append(("name", None))
            else:
                fields.append((f"col{i}", None))
        # Two memory columns: the query is almost always "memory.used,memory.total" (in that order).
        names = {1: ["memory.used"], 2: ["memory.used", "memory.total"], 3: ["memory.total", "memory.used", "memory.free"]}
        for i, name in zip(mem_columns, names.get(len(mem_columns), [])):
            fields[i] = (name, "MiB")
        return fields

    # --- bookkeeping ---------------------------------------------------
    def _add(self, sample: GpuSample) -> None:
        gpus = self._report.gpus
        key = sample.index if sample.index is not None else -1
        series = gpus.get(key)
        if series is None:
            series = gpus[key] = GpuSeries(index=sample.index)
        series.num_samples += 1
        series.name = series.name or sample.name
        if sample.memory_total_bytes:
            series.memory_total_bytes = sample.memory_total_bytes
        if series.first is None:
            series.first = sample
        prev = series.last
        series.last = sample
        used = sample.memory_used_bytes
        if used is not None and (series.peak is None or (series.peak.memory_used_bytes or 0) < used):
            series.peak = sample
        if prev is not None and used is not None and prev.memory_used_bytes is not None:
            delta = used - prev.memory_used_bytes
            if abs(delta) >= self.step_min_bytes and len(series.steps) < self.max_steps:
                series.steps.append(MemoryStep(sample.index, prev.memory_used_bytes, used, sample.timestamp, sample.source_line))


def looks_like_table(sample: str) -> bool:
    return "NVIDIA-SMI" in sample and ("MiB /" in sample or "Memory-Usage" in sample)


def looks_like_csv(sample: str) -> bool:
    head = sample.lstrip().splitlines()[:1]
    if not head:
        return False
    first = head[0]
    if "memory.used" in first or "memory.total" in first or "used_gpu_memory" in first:
        return True
    # noheader form: "2024/05/01 12:00:00.123, 0, NVIDIA H100 80GB HBM3, 1234 MiB, 81559 MiB"
    cells = _CSV_SPLIT.split(first.strip())
    return len(cells) >= 2 and sum(c.endswith(" MiB") for c in cells) >= 1 and all("|" not in c for c in cells)


def parse_nvidia_smi(text: str) -> NvidiaSmiReport:
    """Parse a whole (small) text: table or CSV, detected from content."""
    form = "csv" if looks_like_csv(text) and not looks_like_table(text) else "table"
    parser = NvidiaSmiParser(form)
    for i, line in enumerate(text.splitlines(), start=1):
        parser.feed(i, line)
    return parser.report()
