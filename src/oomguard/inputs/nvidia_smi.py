"""Parse ``nvidia-smi`` output: the default table and ``--query-gpu ... --format=csv`` series.

The one reader of nvidia-smi captures: ``diagnose`` (any input that looks like one), ``check --nvidia-smi``
and ``host --nvidia-smi`` (``host/gpus.parse_nvidia_smi_csv`` turns this report into its snapshot) all
read through ``NvidiaSmiParser``. ``strict=True`` is host's reading: a CSV must have its header, and a
row that is not what nvidia-smi prints is a one-line error naming the file and line (exit 2), where
diagnose and check skip it. The live sampling query that ``probe`` and ``watch`` run once per tick
(``SAMPLING_QUERY``: ``--format=csv,noheader,nounits``, no header to read) is a mode of the same
reader: ``read_sampling`` gives the parser the query's own columns instead of a header.

Both forms may repeat (``watch nvidia-smi``, ``nvidia-smi -l 1``,
``--query-gpu=... --format=csv -l 1``), so the parser is incremental: feed it
lines with ``NvidiaSmiParser.feed`` and read ``report()`` at the end. Memory is
one entry per GPU (its first, last and peak samples, at most ``max_steps`` jumps)
and per distinct process (at most ``MAX_PROCESSES``), whatever the length; a CSV
row costs a split and a few dictionary lookups (a series of days at 1 s is a
million rows: ``benchmarks/host_readers.py``).

Sizes are bytes (``*_bytes``). nvidia-smi prints MiB.
"""

from __future__ import annotations

from collections.abc import Iterable

import oomguard.lazy_re as lazy_re
from oomguard.errors import InputError
from oomguard.numbers import NumberError, float_or_none, int_or_none, parse_float
from oomguard.records import field, record

MiB = 1 << 20
# Distinct processes kept from a capture (a series repeats the same pids every sample; distinct ones are few).
MAX_PROCESSES = 4096
# The header names of the two queries (``--query-gpu``, ``--query-compute-apps``) that make a line a header.
_HEADER_NAMES = frozenset({"timestamp", "index", "name", "pid", "uuid", "gpu_uuid", "process_name", "gpu_name",
                           "gpu_bus_id", "pci.bus_id"})

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


@record
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


@record(frozen=True)
class GpuProcess:
    gpu_index: int | None
    pid: int
    name: str
    used_memory_bytes: int | None
    type: str = "C"
    gpu_uuid: str | None = None  # the CSV's gpu_uuid column (--query-compute-apps)


@record(frozen=True)
class MemoryStep:
    """A jump in used memory between two consecutive samples of one GPU."""

    gpu_index: int | None
    from_bytes: int
    to_bytes: int
    timestamp: str | None
    source_line: int | None


@record
class GpuSeries:
    """All we keep about one GPU across the samples."""

    index: int | None
    name: str | None = None
    memory_total_bytes: int | None = None
    uuid: str | None = None
    first: GpuSample | None = None
    last: GpuSample | None = None
    peak: GpuSample | None = None
    num_samples: int = 0
    steps: list[MemoryStep] = field(default_factory=list)


@record
class NvidiaSmiReport:
    form: str  # "table" or "csv"
    driver_version: str | None = None
    cuda_version: str | None = None
    gpus: dict[int, GpuSeries] = field(default_factory=dict)
    processes: list[GpuProcess] = field(default_factory=list)
    num_snapshots: int = 0
    processes_dropped: int = 0  # distinct processes past MAX_PROCESSES, not kept

    @property
    def peak_used_bytes(self) -> int | None:
        peaks = [g.peak.memory_used_bytes for g in self.gpus.values() if g.peak and g.peak.memory_used_bytes is not None]
        return max(peaks) if peaks else None


# A GPU's memory in MiB: the largest card has under 2**20 MiB (1 TiB); a larger cell is not a reading (the bound
# keeps a hostile cell from becoming a byte count no arithmetic downstream expects).
_MAX_MIB = float(1 << 24)


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


def _strict_mib(cell: str, where: str | None, line: int) -> int | None:
    """A memory cell of host's strict reading: MiB (or a bare number), None for nvidia-smi's "[N/A]" /
    "[Insufficient Permissions]" / an empty cell, else a one-line error."""
    value = cell.strip()
    if value.startswith("[") or value.upper() in ("N/A", ""):
        return None
    try:
        return int(parse_float(value.removesuffix("MiB").strip(), lo=0, hi=_MAX_MIB) * MiB)
    except NumberError as exc:
        raise InputError(f"not a MiB value: {value[:40]!r} ({exc.why})", file=where, line=line) from None


def _header_key(cell: str) -> str:
    return cell.strip().split(" [", 1)[0].strip().lower()


class _Gpu:
    """One GPU of a CSV series while it is read: plain values, no sample object per row (a series is a
    million rows); ``GpuSeries`` is filled from it in ``report()``."""

    __slots__ = ("index", "uuid", "name", "total", "samples", "last", "first", "peak", "peak_used", "prev_used",
                 "steps")

    def __init__(self, index: int | None) -> None:
        self.index = index
        self.uuid: str | None = None
        self.name: str | None = None
        self.total: int | None = None
        self.samples = 0
        self.last: tuple | None = None
        self.first: GpuSample | None = None
        self.peak: GpuSample | None = None
        self.peak_used = -1
        self.prev_used: int | None = None
        self.steps: list[MemoryStep] = []


def _sample(index: int | None, row: tuple) -> GpuSample:
    stamp, name, used, total, free, util, line_no, uuid = row
    return GpuSample(index=index, name=name, memory_used_bytes=used, memory_total_bytes=total, memory_free_bytes=free,
                     utilization_pct=util, timestamp=stamp, source_line=line_no)


class NvidiaSmiParser:
    """Incremental parser; ``form`` is ``"table"``, ``"csv"`` or ``None`` (decide from content).

    ``strict`` (host): a CSV row before any header, with fewer cells than its header, or with a cell that is
    not what nvidia-smi prints (a memory figure, a GPU index, a pid) is an ``InputError`` naming ``source``
    and the line; so is a GPU row without its total memory, and a capture with no row at all (``finish``).
    Lenient (diagnose, check): such rows are skipped, and a CSV without a header has its columns guessed."""

    def __init__(self, form: str | None = None, *, step_min_bytes: int = 1 << 30, max_steps: int = 50,
                 strict: bool = False, source: str | None = None, columns: Iterable[str] | None = None):
        self.form = form
        self.step_min_bytes = step_min_bytes
        self.max_steps = max_steps
        self.strict = strict
        self.source = source
        self._report = NvidiaSmiReport(form=form or "table")
        self._csv_fields: list[tuple[str, str | None]] | None = None
        self._col: dict[str, int] = {}
        self._apps_rows = False
        self._pending: GpuSample | None = None
        self._in_processes = False
        self._timestamp: str | None = None
        self._seen_pids: set[tuple[int | None, int]] = set()
        self._gpus: dict[int, _Gpu] = {}
        self._apps: dict[tuple[str | None, int], list] = {}
        self._indices: dict[str, int | None] = {}  # "0" -> 0: a series repeats the same few index cells
        self._mibs: dict[str, int | None] = {}  # the same for memory cells (a total, the used values)
        if columns is not None:  # a noheader query whose columns the caller asked for (SAMPLING_QUERY)
            self._set_fields([(name, None) for name in columns])

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
        """What was read so far (a CSV series' GPUs filled in from what was kept per GPU)."""
        rep = self._report
        for key, g in self._gpus.items():
            series = rep.gpus.get(key)
            if series is None:
                series = rep.gpus[key] = GpuSeries(index=g.index)
            series.name, series.uuid, series.memory_total_bytes = g.name, g.uuid, g.total
            series.num_samples = g.samples
            series.first, series.peak, series.steps = g.first, g.peak, g.steps
            series.last = _sample(g.index, g.last) if g.last is not None else None
        if self._apps:
            by_uuid = {g.uuid: g.index for g in self._gpus.values() if g.uuid}
            rep.processes = [GpuProcess(by_uuid.get(uuid or ""), pid, name, used, "C", uuid)
                             for (uuid, pid), (name, used) in self._apps.items()]
        return rep

    def finish(self) -> NvidiaSmiReport:
        """``report()``, and in strict mode an error when the capture held no GPU or process row."""
        rep = self.report()
        if self.strict and not rep.gpus and not rep.processes:
            raise InputError("no GPU or process rows found", file=self.source)
        return rep

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
                if key in self._seen_pids:
                    return
                if len(self._seen_pids) < MAX_PROCESSES:
                    self._seen_pids.add(key)
                    self._report.processes.append(GpuProcess(gpu_i, pid_i, name.strip(), used_b, kind))
                else:
                    self._report.processes_dropped += 1
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
    def _header(self, cells: list[str]) -> bool:
        """Take ``cells`` as the columns when they are a header line (either query's)."""
        keys = [_header_key(c) for c in cells]
        if self.strict:
            if "index" not in keys and "pid" not in keys:
                return False  # host reads the two queries' own columns (a GPU row names its index)
        elif not any(k in _HEADER_NAMES or k.startswith(("memory.", "utilization.", "used_")) for k in keys):
            return False
        fields = []
        for c in cells:
            m = _CSV_UNIT.match(c.strip())
            fields.append((m.group(1).strip().lower(), m.group(2)) if m else (c.strip().lower(), None))
        self._set_fields(fields)
        return True

    def _set_fields(self, fields: list[tuple[str, str | None]]) -> None:
        self._csv_fields = fields
        self._col = {name: i for i, (name, _unit) in reversed(list(enumerate(fields)))}  # first of a repeated name
        self._apps_rows = "pid" in self._col and "index" not in self._col

    def _csv_error(self, why: str, line_no: int) -> None:
        """Strict: the one-line error; lenient: the row is skipped (the caller returns)."""
        if self.strict:
            raise InputError(why, file=self.source, line=line_no)

    def _mib_cell(self, cell: str, line_no: int) -> int | None:
        value = self._mibs.get(cell, -1)
        if value != -1:
            return value
        value = _strict_mib(cell, self.source, line_no) if self.strict else _mib(cell)
        if len(self._mibs) < 4096:
            self._mibs[cell] = value
        return value

    def _feed_csv(self, line_no: int, line: str) -> None:
        text = line.strip()
        if not text:
            return
        cells = text.split(",")
        if ("index" in text or "pid" in text or "memory." in text or "name" in text or "uuid" in text
                or "timestamp" in text or "utilization." in text) and self._header(cells):
            return
        if self._csv_fields is None:
            if text.lower().startswith("no running"):
                return  # "No running processes found"
            if self.strict:
                raise InputError("no CSV header line; make the file with nvidia-smi --query-gpu=... --format=csv "
                                 "(not noheader) and --query-compute-apps=... --format=csv",
                                 file=self.source, line=line_no)
            self._set_fields(self._guess_fields([c.strip() for c in cells]))
        col = self._col
        n = len(self._csv_fields)  # type: ignore[arg-type]
        if len(cells) != n:
            if not self.strict or text.lower().startswith("no running"):
                return  # not a row of this header
            if len(cells) < n:
                raise InputError(f"expected {n} columns, found {len(cells)}", file=self.source, line=line_no)
            # more cells than the header (host): a process name holding commas; the columns are read by position
        if self._apps_rows:
            self._csv_app(cells, col, line_no)
        else:
            self._csv_gpu(cells, col, line_no)

    def _csv_app(self, cells: list[str], col: dict[str, int], line_no: int) -> None:
        i = col.get("used_gpu_memory", col.get("used_memory"))
        if i is None:
            return
        pid_text = cells[col["pid"]].strip()
        pid = _small(pid_text)
        if pid is None:
            self._csv_error(f"not a pid: {pid_text[:40]!r}", line_no)
            return
        used = self._mib_cell(cells[i], line_no)
        u = col.get("gpu_uuid")
        key = (cells[u].strip() if u is not None else None, pid)
        entry = self._apps.get(key)
        if entry is not None:
            if used is not None and (entry[1] is None or used > entry[1]):
                entry[1] = used
        elif len(self._apps) < MAX_PROCESSES:
            n = col.get("process_name")
            self._apps[key] = [cells[n].strip() if n is not None else "?", used]
        else:
            self._report.processes_dropped += 1

    def _csv_gpu(self, cells: list[str], col: dict[str, int], line_no: int) -> None:
        i = col.get("memory.used")
        used = self._mib_cell(cells[i], line_no) if i is not None else None
        i = col.get("memory.total")
        total = self._mib_cell(cells[i], line_no) if i is not None else None
        i = col.get("memory.free")
        free = self._mib_cell(cells[i], line_no) if i is not None else None
        if used is None and total and free is not None:
            used = total - free
        if self.strict:
            if not total:
                raise InputError("memory.total missing or 0 for a GPU", file=self.source, line=line_no)
            used = used or 0
        elif used is None and total is None:
            return
        index = None
        i = col.get("index")
        if i is not None:
            index_text = cells[i]
            index = self._indices.get(index_text, -1)
            if index == -1:
                index = _small(index_text.strip(), 1 << 16)
                if len(self._indices) < 1024:
                    self._indices[index_text] = index
            if index is None and self.strict:
                raise InputError(f"not a GPU index: {index_text.strip()[:40]!r}", file=self.source, line=line_no)
        util = None
        i = col.get("utilization.gpu")
        if i is not None:
            m = _NUMBER_UNIT.match(cells[i].strip())
            if m:
                util = _pct(m.group(1))
        i = col.get("timestamp")
        stamp = cells[i].strip() if i is not None else None
        key = index if index is not None else -1
        g = self._gpus.get(key)
        if g is None:
            g = self._gpus[key] = _Gpu(index)
            i = col.get("uuid")
            g.uuid = cells[i].strip() if i is not None else None
        if g.name is None:
            i = col.get("name")
            g.name = cells[i].strip() if i is not None else None
        if total:
            g.total = total
        row = (stamp, g.name, used, total, free, util, line_no, g.uuid)
        g.last = row
        g.samples += 1
        self._report.num_snapshots += 1
        if g.first is None:
            g.first = _sample(index, row)
        if used is not None:
            if used > g.peak_used:
                g.peak_used = used
                g.peak = _sample(index, row)
            prev = g.prev_used
            if prev is not None and abs(used - prev) >= self.step_min_bytes and len(g.steps) < self.max_steps:
                g.steps.append(MemoryStep(index, prev, used, stamp, line_no))
            g.prev_used = used

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

    # --- bookkeeping (the table form) ------------------------------------
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


# The live sampling query (probe and watch, once per tick). ``nounits``: the memory cells are MiB and
# utilization is %, as the reader takes a bare number; ``[N/A]`` / ``[Not Supported]`` (a MIG-enabled card's
# utilization, some boards' memory) are not readings and leave that value out.
SAMPLING_FIELDS = ("index", "memory.used", "memory.total", "utilization.gpu")
SAMPLING_QUERY = ("nvidia-smi", "--query-gpu=" + ",".join(SAMPLING_FIELDS), "--format=csv,noheader,nounits")


def read_sampling(text: str, fields: Iterable[str] = SAMPLING_FIELDS) -> list[GpuSample]:
    """One answer of the sampling query: a sample per GPU, by index. A row that is not the query's (a
    warning, a wrong cell count, no GPU index) is skipped, as diagnose reads a capture."""
    parser = NvidiaSmiParser("csv", columns=fields)
    report = parser.feed_all(enumerate(text.splitlines(), start=1))
    return [g.last for _, g in sorted(report.gpus.items()) if g.index is not None and g.last is not None]


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


def parse_nvidia_smi(text: str | Iterable[tuple[int, str]], sample: str | None = None) -> NvidiaSmiReport:
    """Parse a capture, table or CSV (detected from content: ``text``, or ``sample``, its first bytes, when
    ``text`` is the ``(line_no, line)`` pairs of a streamed file)."""
    head = text if isinstance(text, str) else (sample or "")
    form = "csv" if looks_like_csv(head) and not looks_like_table(head) else "table"
    parser = NvidiaSmiParser(form)
    lines = enumerate(text.splitlines(), start=1) if isinstance(text, str) else text
    for i, line in lines:
        parser.feed(i, line)
    return parser.report()
