"""The GPUs and the processes already holding their memory, behind one small interface.

Three sources give the same ``GpuSnapshot``:

- ``NvmlSource``: NVML through the optional ``pynvml`` module (nvidia-ml-py);
- ``NvidiaSmiSource``: runs ``nvidia-smi --query-gpu`` and ``--query-compute-apps``;
- ``parse_nvidia_smi_csv``: a file holding the CSV those two queries print,
  for machines we are not on (``oomguard host --nvidia-smi FILE``).

The file is made with::

    nvidia-smi --query-gpu=index,uuid,name,memory.total,memory.used --format=csv > gpus.csv
    nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv >> gpus.csv
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from dataclasses import dataclass
from typing import Protocol
from collections.abc import Callable, Iterable

from oomguard.errors import InputError
from oomguard.numbers import NumberError, int_or_none, parse_float
from oomguard.units import MiB

__all__ = [
    "GpuDevice",
    "GpuProcess",
    "GpuSnapshot",
    "GpuSource",
    "NvmlSource",
    "NvidiaSmiSource",
    "parse_nvidia_smi_csv",
]

GPU_QUERY = "index,uuid,name,memory.total,memory.used"
APPS_QUERY = "gpu_uuid,pid,process_name,used_memory"


@dataclass(frozen=True)
class GpuDevice:
    index: int
    uuid: str | None
    name: str | None
    total_bytes: int
    used_bytes: int  # the last sample's, when the input is a series
    peak_used_bytes: int | None = None  # the largest of a series (None: one sample)
    samples: int = 1

    @property
    def free_bytes(self) -> int:
        return max(0, self.total_bytes - self.used_bytes)


@dataclass(frozen=True)
class GpuProcess:
    gpu_index: int | None
    gpu_uuid: str | None
    pid: int
    name: str
    used_bytes: int | None  # None where the driver does not say (containers without host PIDs)


@dataclass(frozen=True)
class GpuSnapshot:
    source: str  # "nvml", "nvidia-smi" or the file name
    devices: tuple[GpuDevice, ...]
    processes: tuple[GpuProcess, ...]
    processes_dropped: int = 0  # distinct processes past MAX_PROCESSES, not kept

    def device(self, index: int) -> GpuDevice | None:
        return next((d for d in self.devices if d.index == index), None)

    def processes_on(self, index: int) -> list[GpuProcess]:
        return [p for p in self.processes if p.gpu_index == index]

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "devices": [
                {
                    "index": d.index,
                    "uuid": d.uuid,
                    "name": d.name,
                    "total_bytes": d.total_bytes,
                    "used_bytes": d.used_bytes,
                    "free_bytes": d.free_bytes,
                    **({"peak_used_bytes": d.peak_used_bytes, "samples": d.samples} if d.samples > 1 else {}),
                }
                for d in self.devices
            ],
            "processes": [
                {
                    "gpu_index": p.gpu_index,
                    "gpu_uuid": p.gpu_uuid,
                    "pid": p.pid,
                    "name": p.name,
                    "used_bytes": p.used_bytes,
                }
                for p in self.processes
            ],
        }


class GpuSource(Protocol):
    name: str

    def snapshot(self) -> GpuSnapshot: ...


# ---------------------------------------------------------------------------
# NVML


def _text(value: object) -> str:
    # Old pynvml releases return bytes, new ones str.
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class NvmlSource:
    """NVML through ``pynvml``; ``module`` is injectable so tests can pass a recorded stand-in."""

    name = "nvml"

    def __init__(self, module: object | None = None):
        if module is None:
            import pynvml as module  # optional dependency: nvidia-ml-py
        self._nvml = module

    @classmethod
    def available(cls) -> bool:
        try:
            import pynvml  # noqa: F401
        except ImportError:
            return False
        return True

    def snapshot(self) -> GpuSnapshot:
        nv = self._nvml
        nv.nvmlInit()
        try:
            devices: list[GpuDevice] = []
            processes: list[GpuProcess] = []
            for index in range(nv.nvmlDeviceGetCount()):
                handle = nv.nvmlDeviceGetHandleByIndex(index)
                mem = nv.nvmlDeviceGetMemoryInfo(handle)
                uuid = _text(nv.nvmlDeviceGetUUID(handle))
                devices.append(
                    GpuDevice(index, uuid, _text(nv.nvmlDeviceGetName(handle)), int(mem.total), int(mem.used))
                )
                for proc in nv.nvmlDeviceGetComputeRunningProcesses(handle):
                    try:
                        pname = _text(nv.nvmlSystemGetProcessName(proc.pid))
                    except Exception:  # the pid may live in another PID namespace
                        pname = "?"
                    used = getattr(proc, "usedGpuMemory", None)
                    processes.append(GpuProcess(index, uuid, int(proc.pid), pname, None if used is None else int(used)))
            return GpuSnapshot("nvml", tuple(devices), tuple(processes))
        finally:
            nv.nvmlShutdown()


# ---------------------------------------------------------------------------
# nvidia-smi CSV


# A GPU's memory in MiB: the largest card has under 2**20 MiB (1 TiB); the bound keeps a hostile
# cell from becoming a byte count no arithmetic downstream expects.
_MAX_MIB = 1 << 24
# Processes kept from a CSV series (the same pids repeat every sample; distinct ones are few).
MAX_PROCESSES = 4096


def _mib(cell: str, where: str, line: int) -> int | None:
    try:
        return _mib_value(cell)
    except NumberError as exc:
        raise InputError(f"not a MiB value: {cell.strip()[:40]!r} ({exc.why})", file=where, line=line) from None


@functools.lru_cache(maxsize=1 << 12)
def _mib_value(cell: str) -> int | None:
    # Cached: a series repeats the same few thousand cells (a total, the used values) per GPU.
    value = cell.strip()
    if value.startswith("[") or value.upper() in ("N/A", ""):
        return None  # "[N/A]", "[Insufficient Permissions]"
    value = value.removesuffix("MiB").strip()
    return int(parse_float(value, lo=0, hi=_MAX_MIB) * MiB)


def _header_key(cell: str) -> str:
    return cell.strip().split(" [", 1)[0].strip().lower()


class _Device:
    """What is kept of one GPU across a CSV series: its last row and its peak."""

    __slots__ = ("index", "uuid", "name", "total", "used", "peak", "samples")

    def __init__(self, index: int, uuid: str | None, name: str | None, total: int, used: int):
        self.index, self.uuid, self.name, self.total, self.used = index, uuid, name, total, used
        self.peak, self.samples = used, 1


def parse_nvidia_smi_csv(text: str | Iterable[tuple[int, str]], source: str = "nvidia-smi") -> GpuSnapshot:
    """Parse the CSV of the two queries (with headers), in either order, in one text.

    ``text`` is the whole text or an iterator of ``(line_no, line)`` (a streamed file): memory is
    one entry per GPU and per distinct process, whatever the length. A series (``-l 1``) repeats
    every GPU each sample: the device keeps its last row (the current state), with the peak
    used memory and the number of samples.
    """
    lines = enumerate(text.splitlines(), start=1) if isinstance(text, str) else text
    devices: dict[int, _Device] = {}
    apps: dict[tuple[str | None, int], tuple[str, int | None]] = {}
    columns: list[str] | None = None
    col: dict[str, int] = {}
    gpu_rows = False
    indices: dict[str, int | None] = {}  # "0" -> 0: a series repeats the same few index cells
    dropped = 0
    for no, raw in lines:
        line = raw.strip()
        if not line:
            continue
        cells = line.split(",")
        if "index" in line or "pid" in line:
            keys = [_header_key(c) for c in cells]
            if "index" in keys or "pid" in keys:
                columns = keys
                col = {k: i for i, k in reversed(list(enumerate(keys)))}  # first of a repeated name
                gpu_rows = "index" in col
                continue
        if columns is None:
            if line.lower().startswith("no running"):
                continue
            raise InputError(
                "no CSV header line; make the file with nvidia-smi --query-gpu=... --format=csv "
                "(not noheader) and --query-compute-apps=... --format=csv",
                file=source,
                line=no,
            )
        if len(cells) < len(columns):
            if line.lower().startswith("no running"):
                continue
            raise InputError(f"expected {len(columns)} columns, found {len(cells)}", file=source, line=no)

        def cell(name: str) -> str | None:
            i = col.get(name)
            return cells[i].strip() if i is not None else None

        if gpu_rows:
            total = _mib(cell("memory.total") or "", source, no)
            used = _mib(cell("memory.used") or "", source, no) or 0
            if not total:
                raise InputError("memory.total missing or 0 for a GPU", file=source, line=no)
            index_text = cells[col["index"]]
            index = indices.get(index_text, -1)
            if index == -1:
                index = int_or_none(index_text, lo=0, hi=1 << 16)
                if len(indices) < 1024:
                    indices[index_text] = index
            if index is None:
                raise InputError(f"not a GPU index: {index_text.strip()[:40]!r}", file=source, line=no)
            dev = devices.get(index)
            if dev is None:
                devices[index] = _Device(index, cell("uuid"), cell("name"), total, used)
            else:
                dev.total, dev.used = total, used
                if used > dev.peak:
                    dev.peak = used
                dev.samples += 1
        else:
            pid_text = cell("pid") or ""
            pid = int_or_none(pid_text, lo=0, hi=1 << 32)
            if pid is None:
                raise InputError(f"not a pid: {pid_text[:40]!r}", file=source, line=no)
            used_cell = cell("used_gpu_memory") if "used_gpu_memory" in col else cell("used_memory")
            used_app = _mib(used_cell or "", source, no)
            key = (cell("gpu_uuid"), pid)
            if key in apps:
                prev = apps[key][1]
                apps[key] = (apps[key][0], used_app if prev is None else max(prev, used_app or 0))
            elif len(apps) < MAX_PROCESSES:
                apps[key] = (cell("process_name") or "?", used_app)
            else:
                dropped += 1
    if not devices and not apps:
        raise InputError("no GPU or process rows found", file=source)
    by_uuid = {d.uuid: d.index for d in devices.values() if d.uuid}
    processes = tuple(GpuProcess(by_uuid.get(uuid or ""), uuid, pid, name, used)
                      for (uuid, pid), (name, used) in apps.items())
    out = tuple(GpuDevice(d.index, d.uuid, d.name, d.total, d.used, d.peak if d.samples > 1 else None, d.samples)
                for d in sorted(devices.values(), key=lambda d: d.index))
    return GpuSnapshot(source, out, processes, processes_dropped=dropped)


Runner = Callable[[list[str]], str]


def _run(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=15, check=False)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{' '.join(argv)} did not answer within 15 s") from None
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip() or f"{argv[0]} exited with {done.returncode}")
    return done.stdout


class NvidiaSmiSource:
    """Runs nvidia-smi; ``runner`` is injectable for tests."""

    name = "nvidia-smi"

    def __init__(self, runner: Runner | None = None, binary: str = "nvidia-smi"):
        self._run = runner or _run
        self._binary = binary

    @staticmethod
    def available() -> bool:
        return shutil.which("nvidia-smi") is not None

    def snapshot(self) -> GpuSnapshot:
        gpus = self._run([self._binary, f"--query-gpu={GPU_QUERY}", "--format=csv"])
        apps = self._run([self._binary, f"--query-compute-apps={APPS_QUERY}", "--format=csv"])
        snap = parse_nvidia_smi_csv(gpus + "\n" + apps, "nvidia-smi")
        return GpuSnapshot("nvidia-smi", snap.devices, snap.processes)

    def topology_text(self) -> str:
        return self._run([self._binary, "topo", "-m"])
