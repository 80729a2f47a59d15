"""Memory samplers: one small interface, one class per source.

``probe`` runs them while it loads the server; ``watch`` will run the same
classes on a timer. Each sampler turns one reading into :class:`Sample`
records (timestamp, source, key such as ``gpu0`` or ``server``, numeric
values); blocking ones (NVML, ``nvidia-smi``, psutil, the kernel log) run in
a worker thread so the event loop that drives the load never waits on them.

Sources: NVML (``nvidia-ml-py``, optional), ``nvidia-smi --query-gpu`` when
NVML is absent, vLLM's ``/metrics`` (see ``metrics.py``), the server's process
tree RSS (psutil), and new kernel OOM-killer lines (``/dev/kmsg`` or
``dmesg``; see ``kernel.py``).
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from oomguard.inputs.nvidia_smi import SAMPLING_QUERY
from oomguard.probe.classes import Source


@dataclass
class Sample:
    """One reading. ``t`` is seconds since the run started."""

    t: float
    source: Source
    key: str
    values: dict[str, float] = field(default_factory=dict)
    text: str | None = None  # kernel log lines only

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"t": round(self.t, 3), "key": self.key, **self.values}
        if self.text is not None:
            d["text"] = self.text
        return d


@runtime_checkable
class MemorySampler(Protocol):
    """What ``probe`` and ``watch`` need from a source of memory readings."""

    source: Source
    name: str

    async def sample(self, t: float) -> list[Sample]: ...

    async def close(self) -> None: ...


class ThreadedSampler:
    """Base for samplers whose reading blocks: run it off the event loop.

    ``inline`` readers (a few /proc reads, well under a millisecond) run on the
    loop instead: a thread hand-off per tick costs more CPU than the read, through
    GIL contention with the streams the loop is serving.
    """

    source: Source
    name: str
    inline: bool = False

    def sample_sync(self, t: float) -> list[Sample]:  # pragma: no cover - abstract
        raise NotImplementedError

    async def sample(self, t: float) -> list[Sample]:
        if self.inline:
            return self.sample_sync(t)
        return await asyncio.to_thread(self.sample_sync, t)

    async def close(self) -> None:
        return None


# -- NVML ------------------------------------------------------------------


class NvmlSampler(ThreadedSampler):
    """Per-GPU used/total via NVML, plus the memory of the server's own processes.

    ``nvml`` is the ``pynvml`` module (from ``nvidia-ml-py``) or any object with
    the same few functions, which is how the tests feed recorded values.
    """

    source = Source.NVML
    name = "nvml"

    def __init__(self, nvml: Any, server_pids: Callable[[], set[int]] | None = None):
        self._nvml = nvml
        self._server_pids = server_pids
        nvml.nvmlInit()
        self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        self.gpu_names = [_text(nvml.nvmlDeviceGetName(h)) for h in self._handles]

    @classmethod
    def create(cls, server_pids: Callable[[], set[int]] | None = None) -> tuple[NvmlSampler | None, str]:
        try:
            import pynvml  # nvidia-ml-py; optional
        except ImportError:
            return None, "nvidia-ml-py not installed (pip install 'oomguard[nvml]')"
        try:
            sampler = cls(pynvml, server_pids)
        except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
            return None, f"NVML unavailable: {exc}"
        if not sampler._handles:
            return None, "NVML found no GPU"
        return sampler, f"NVML: {len(sampler._handles)} GPU(s): {', '.join(sampler.gpu_names)}"

    def sample_sync(self, t: float) -> list[Sample]:
        nvml = self._nvml
        pids = self._server_pids() if self._server_pids else set()
        out = []
        for i, handle in enumerate(self._handles):
            mem = nvml.nvmlDeviceGetMemoryInfo(handle)
            values: dict[str, float] = {
                "used_bytes": float(mem.used),
                "total_bytes": float(mem.total),
                "free_bytes": float(mem.free),
            }
            try:
                values["util_pct"] = float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
            except Exception:  # noqa: BLE001 - not supported on some boards (MIG, vGPU)
                pass
            if pids:
                try:
                    procs = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
                except Exception:  # noqa: BLE001
                    procs = []
                values["server_bytes"] = float(
                    sum((p.usedGpuMemory or 0) for p in procs if p.pid in pids)
                )
            out.append(Sample(t, self.source, f"gpu{i}", values))
        return out

    async def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutting down is best effort
            pass


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


# -- nvidia-smi ---------------------------------------------------------------

def smi_samples(t: float, text: str) -> list[Sample]:
    """One answer of the sampling query, read by the one nvidia-smi reader (``inputs/nvidia_smi.read_sampling``),
    as samples keyed ``gpuN``; a value nvidia-smi did not give (``[N/A]``) is left out."""
    from oomguard.inputs.nvidia_smi import read_sampling

    out = []
    for g in read_sampling(text):
        values: dict[str, float] = {}
        if g.memory_used_bytes is not None:
            values["used_bytes"] = float(g.memory_used_bytes)
        if g.memory_total_bytes is not None:
            values["total_bytes"] = float(g.memory_total_bytes)
        if g.utilization_pct is not None:
            values["util_pct"] = float(g.utilization_pct)
        if g.memory_used_bytes is not None and g.memory_total_bytes is not None:
            values["free_bytes"] = float(g.memory_total_bytes - g.memory_used_bytes)
        out.append(Sample(t, Source.NVIDIA_SMI, f"gpu{g.index}", values))
    return out


def _run_smi(argv: tuple[str, ...]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, timeout=5, check=True).stdout


class NvidiaSmiSampler(ThreadedSampler):
    """``nvidia-smi --query-gpu`` once per tick: S2's own ``watch`` loop, parsed."""

    source = Source.NVIDIA_SMI
    name = "nvidia-smi"

    def __init__(self, run: Callable[[tuple[str, ...]], str] = _run_smi):
        self._run = run

    @classmethod
    def create(cls) -> tuple[NvidiaSmiSampler | None, str]:
        import shutil

        if shutil.which("nvidia-smi") is None:
            return None, "nvidia-smi not on PATH"
        sampler = cls()
        try:
            rows = smi_samples(0.0, sampler._run(SAMPLING_QUERY))
        except (OSError, subprocess.SubprocessError) as exc:
            return None, f"nvidia-smi failed: {exc}"
        if not rows:
            return None, "nvidia-smi listed no GPU"
        return sampler, f"nvidia-smi: {len(rows)} GPU(s)"

    def sample_sync(self, t: float) -> list[Sample]:
        return smi_samples(t, self._run(SAMPLING_QUERY))


# -- process RSS -----------------------------------------------------------------


def find_server_pid(port: int) -> int | None:
    """The pid listening on ``port`` on this host (the API server), or None."""
    import psutil

    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, OSError):
        conns = []
    for c in conns:
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid:
            return c.pid
    # Without privileges net_connections hides pids; our own processes are still visible.
    for proc in psutil.process_iter(["pid"]):
        try:
            for c in proc.net_connections(kind="tcp"):
                if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port:
                    return proc.pid
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess, OSError):
            continue
    return None


class ProcessTree:
    """The server process and its children (vLLM's engine core and workers)."""

    def __init__(self, pid: int):
        import psutil

        self.pid = pid
        self._root = psutil.Process(pid)
        self.name = self._root.name()

    def pids(self) -> set[int]:
        import psutil

        try:
            return {self.pid, *(c.pid for c in self._root.children(recursive=True))}
        except psutil.Error:
            return {self.pid}

    def alive(self) -> bool:
        import psutil

        try:
            return self._root.is_running() and self._root.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False


class RssSampler(ThreadedSampler):
    """RSS of the server's process tree and the host's available RAM.

    RSS of parent and children is summed; shared pages (libraries, CUDA
    mappings) are counted once per process, so the sum is an upper bound.
    """

    source = Source.RSS
    name = "rss"
    inline = True  # /proc/<pid>/statm per process, cached psutil handles

    REFRESH_S = 5.0  # how often the list of children is walked again

    def __init__(self, tree: ProcessTree):
        self.tree = tree
        self.pids_seen: set[int] = set()
        self._procs: dict[int, Any] = {}
        self._refreshed = -1e9

    def _processes(self) -> list[Any]:
        import psutil

        now = time.monotonic()
        if now - self._refreshed >= self.REFRESH_S:
            pids = self.tree.pids()
            for pid in pids - self._procs.keys():
                try:
                    self._procs[pid] = psutil.Process(pid)
                except psutil.Error:
                    continue
            for pid in self._procs.keys() - pids:
                del self._procs[pid]
            self._refreshed = now
        return list(self._procs.values())

    def sample_sync(self, t: float) -> list[Sample]:
        import psutil

        rss = 0
        n = 0
        largest = 0.0
        for proc in self._processes():
            pid = proc.pid
            try:
                r = proc.memory_info().rss
            except psutil.Error:
                continue
            rss += r
            n += 1
            largest = max(largest, float(r))
            self.pids_seen.add(pid)
        vm = psutil.virtual_memory()
        swap = psutil.swap_memory()
        values = {
            "rss_bytes": float(rss),
            "largest_process_rss_bytes": largest,
            "num_processes": float(n),
            "alive": 1.0 if self.tree.alive() else 0.0,
            "host_available_bytes": float(vm.available),
            "host_total_bytes": float(vm.total),
            "swap_used_bytes": float(swap.used),
        }
        return [Sample(t, self.source, "server", values)]


def now() -> float:
    return time.perf_counter()
