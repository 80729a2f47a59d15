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

import shutil
import subprocess
from dataclasses import dataclass
from typing import Protocol
from collections.abc import Callable

from oomguard.errors import InputError
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
    used_bytes: int

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


def _mib(cell: str, where: str, line: int) -> int | None:
    value = cell.strip()
    if value.startswith("[") or value.upper() in ("N/A", ""):
        return None  # "[N/A]", "[Insufficient Permissions]"
    value = value.removesuffix("MiB").strip()
    try:
        return int(float(value) * MiB)
    except ValueError:
        raise InputError(f"not a MiB value: {cell.strip()!r}", file=where, line=line) from None


def _header_key(cell: str) -> str:
    return cell.strip().split(" [", 1)[0].strip().lower()


def parse_nvidia_smi_csv(text: str, source: str = "nvidia-smi") -> GpuSnapshot:
    """Parse the CSV of the two queries (with headers), in either order, in one text."""
    devices: list[GpuDevice] = []
    apps: list[tuple[str | None, int, str, int | None]] = []
    columns: list[str] | None = None
    for no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        cells = [c.strip() for c in line.split(",")]
        keys = [_header_key(c) for c in cells]
        if "index" in keys or "pid" in keys:
            columns = keys
            continue
        if line.lower().startswith("no running"):
            continue
        if columns is None:
            raise InputError(
                "no CSV header line; make the file with nvidia-smi --query-gpu=... --format=csv "
                "(not noheader) and --query-compute-apps=... --format=csv",
                file=source,
                line=no,
            )
        if len(cells) < len(columns):
            raise InputError(f"expected {len(columns)} columns, found {len(cells)}", file=source, line=no)
        row = dict(zip(columns, cells, strict=False))  # extra cells: a name with a comma
        if "index" in columns:
            total = _mib(row.get("memory.total", ""), source, no)
            used = _mib(row.get("memory.used", ""), source, no)
            if total is None:
                raise InputError("memory.total missing for a GPU", file=source, line=no)
            try:
                index = int(row["index"])
            except ValueError:
                raise InputError(f"not a GPU index: {row['index']!r}", file=source, line=no) from None
            devices.append(GpuDevice(index, row.get("uuid"), row.get("name"), total, used or 0))
        else:
            try:
                pid = int(row["pid"])
            except ValueError:
                raise InputError(f"not a pid: {row['pid']!r}", file=source, line=no) from None
            used_key = "used_gpu_memory" if "used_gpu_memory" in row else "used_memory"
            apps.append((row.get("gpu_uuid"), pid, row.get("process_name", "?"), _mib(row.get(used_key, ""), source, no)))
    if not devices and not apps:
        raise InputError("no GPU or process rows found", file=source)
    by_uuid = {d.uuid: d.index for d in devices if d.uuid}
    processes = tuple(GpuProcess(by_uuid.get(uuid or ""), uuid, pid, name, used) for uuid, pid, name, used in apps)
    return GpuSnapshot(source, tuple(devices), processes)


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
