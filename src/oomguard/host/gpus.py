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
from collections.abc import Callable, Iterable

from oomguard.errors import InputError

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


def parse_nvidia_smi_csv(text: str | Iterable[tuple[int, str]], source: str = "nvidia-smi") -> GpuSnapshot:
    """Parse the CSV of the two queries (with headers), in either order, in one text.

    ``text`` is the whole text or an iterator of ``(line_no, line)`` (a streamed file). Read by the one
    nvidia-smi reader (``inputs/nvidia_smi.py``) in its strict mode: a row that is not what nvidia-smi
    prints is a one-line error naming ``source`` and the line. Memory is one entry per GPU and per distinct
    process, whatever the length. A series (``-l 1``) repeats every GPU each sample: the device keeps its
    last row (the current state), with the peak used memory and the number of samples.
    """
    from oomguard.inputs.nvidia_smi import NvidiaSmiParser

    parser = NvidiaSmiParser("csv", strict=True, source=source)
    lines = enumerate(text.splitlines(), start=1) if isinstance(text, str) else text
    for no, line in lines:
        parser.feed(no, line)
    report = parser.finish()
    devices = []
    for series in sorted(report.gpus.values(), key=lambda g: g.index or 0):
        last = series.last
        assert last is not None and series.index is not None and series.memory_total_bytes  # strict mode's rows
        used = last.memory_used_bytes or 0
        devices.append(GpuDevice(series.index, series.uuid, series.name, last.memory_total_bytes or series.memory_total_bytes,
                                 used, series.peak.memory_used_bytes if series.num_samples > 1 and series.peak else None,
                                 series.num_samples))
    processes = tuple(GpuProcess(p.gpu_index, p.gpu_uuid, p.pid, p.name, p.used_memory_bytes) for p in report.processes)
    return GpuSnapshot(source, tuple(devices), processes, processes_dropped=report.processes_dropped)


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
