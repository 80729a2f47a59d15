"""Read the facts of the machine that will run vLLM, all under one ``Root``.

``read_host_facts`` only reads; it never writes or changes a setting. A fact
that cannot be read (a container hiding /sys, no GPU tools) is None and gets a
note, so checks can say what they could not verify; text that is present but
malformed is bad input (InputError naming the file and line).
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from oomguard.errors import InputError
from oomguard.host.cgroup import CgroupMemory, ContainerKind, detect_container, read_cgroup_memory
from oomguard.host.gpus import GpuSnapshot, NvidiaSmiSource, NvmlSource, parse_nvidia_smi_csv
from oomguard.host.procfs import (
    MemInfo,
    SwapArea,
    parse_limits_nofile,
    parse_meminfo,
    parse_node_meminfo,
    parse_shm_mount,
    parse_swaps,
)
from oomguard.host.root import Root
from oomguard.inputs import files as input_files
from oomguard.inputs.topology import Topology, parse_cpulist, parse_topology
from oomguard.numbers import int_or_none

__all__ = ["HostFacts", "NumaNode", "ShmInfo", "VllmProcess", "read_host_facts"]


@dataclass(frozen=True)
class ShmInfo:
    size_bytes: int | None
    source: str  # "statvfs", "/proc/mounts", or "absent"
    free_bytes: int | None = None  # statvfs on the real root; what vLLM's check_shm_free_space compares with


@dataclass(frozen=True)
class NumaNode:
    node: int
    cpulist: str
    mem_total_bytes: int | None
    mem_free_bytes: int | None

    @property
    def cpus(self) -> frozenset[int]:
        return parse_cpulist(self.cpulist)


@dataclass(frozen=True)
class VllmProcess:
    pid: int
    cmdline: str  # secrets redacted, truncated
    oom_score_adj: int | None


@dataclass(frozen=True)
class HostFacts:
    root: str
    meminfo: MemInfo
    overcommit_memory: int | None
    overcommit_ratio: int | None
    max_map_count: int | None
    swaps: tuple[SwapArea, ...]
    cgroup: CgroupMemory | None
    container: ContainerKind
    shm: ShmInfo
    nofile_soft: int | None  # None: unlimited or unknown (see notes)
    nofile_hard: int | None
    numa_nodes: tuple[NumaNode, ...]
    gpus: GpuSnapshot | None
    topology: Topology | None
    vllm_processes: tuple[VllmProcess, ...]
    notes: tuple[str, ...] = field(default=())
    # --host-ram-gib X: the host RAM of the machine the launch is for (check and fit take the same
    # option); it replaces this machine's MemAvailable and cgroup limit as the budget
    host_ram_override_bytes: int | None = None

    @property
    def swap_total_bytes(self) -> int:
        return sum(s.size_bytes for s in self.swaps) if self.swaps else self.meminfo.swap_total_bytes

    @property
    def ram_budget_bytes(self) -> int:
        """What a new process can use: --host-ram-gib when given, else MemAvailable capped by the cgroup limit."""
        if self.host_ram_override_bytes is not None:
            return self.host_ram_override_bytes
        budget = self.meminfo.mem_available_bytes
        if self.cgroup and self.cgroup.limit_bytes is not None:
            budget = min(budget, self.cgroup.limit_bytes)
        return budget

    def to_dict(self) -> dict:
        out = {
            "root": self.root,
            "meminfo": asdict(self.meminfo),
            "vm": {
                "overcommit_memory": self.overcommit_memory,
                "overcommit_ratio": self.overcommit_ratio,
                "max_map_count": self.max_map_count,
            },
            "swaps": [asdict(s) for s in self.swaps],
            "cgroup": None,
            "container": self.container.value,
            "shm": asdict(self.shm),
            "nofile": {"soft": self.nofile_soft, "hard": self.nofile_hard},
            "numa_nodes": [asdict(n) for n in self.numa_nodes],
            "gpus": self.gpus.to_dict() if self.gpus else None,
            "topology": self.topology.to_dict() if self.topology else None,
            "vllm_processes": [asdict(p) for p in self.vllm_processes],
            "ram_budget_bytes": self.ram_budget_bytes,
            "notes": list(self.notes),
        }
        if self.cgroup:
            cg = asdict(self.cgroup)
            cg["version"] = self.cgroup.version.value
            out["cgroup"] = cg
        return out


# ---------------------------------------------------------------------------


def _read_shm(root: Root, mem_total: int, notes: list[str]) -> ShmInfo:
    if root.is_real:
        try:
            st = os.statvfs("/dev/shm")
        except OSError:
            notes.append("/dev/shm is absent")
            return ShmInfo(None, "absent")
        return ShmInfo(st.f_blocks * st.f_frsize, "statvfs", st.f_bavail * st.f_frsize)
    mounts = root.read_text("/proc/mounts")
    if mounts is None:
        notes.append("no /proc/mounts under the root: /dev/shm size unknown")
        return ShmInfo(None, "absent")
    size = parse_shm_mount(mounts, mem_total, root.display("/proc/mounts"))
    if size is None:
        notes.append("nothing is mounted on /dev/shm")
        return ShmInfo(None, "absent")
    return ShmInfo(size, "/proc/mounts")


def _read_nofile(root: Root, notes: list[str]) -> tuple[int | None, int | None]:
    if root.is_real:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        inf = resource.RLIM_INFINITY
        return (None if soft == inf else soft), (None if hard == inf else hard)
    text = root.read_text("/proc/self/limits")
    if text is None:
        notes.append("no /proc/self/limits under the root: open-file limit unknown")
        return None, None
    return parse_limits_nofile(text, root.display("/proc/self/limits"))


def _read_numa(root: Root) -> tuple[NumaNode, ...]:
    base = root.file("/sys/devices/system/node")
    if not input_files.is_dir(base):
        return ()
    nodes = []
    entries = [p for p in input_files.list_dir(base, "NUMA nodes") if re.fullmatch(r"node\d{1,6}", p.name)]
    for path in sorted(entries, key=lambda p: int(p.name[4:])):
        node = int(path.name[4:])
        rel = f"/sys/devices/system/node/{path.name}"
        cpulist = (root.read_text(f"{rel}/cpulist") or "").strip()
        try:
            parse_cpulist(cpulist)
        except ValueError:
            raise InputError(f"bad cpulist {cpulist[:40]!r}", file=root.display(f"{rel}/cpulist"), line=1) from None
        meminfo = root.read_text(f"{rel}/meminfo")
        total, free = parse_node_meminfo(meminfo, root.display(f"{rel}/meminfo")) if meminfo else (None, None)
        nodes.append(NumaNode(node, cpulist, total, free))
    return tuple(nodes)


def redact_argv(argv: list[str]) -> str:
    """Join a command line with secrets masked (oomguard.redact: secret flags, HF_TOKEN=..., key shapes)."""
    from oomguard.redact import redact_argv as _redact

    text = " ".join(_redact(argv))
    return text if len(text) <= 200 else text[:197] + "..."


def _is_vllm(argv: list[str]) -> bool:
    if not argv:
        return False
    if argv[0].startswith("VLLM::"):  # vLLM retitles its engine-core and worker processes
        return True
    return any(Path(a).name == "vllm" or a.startswith("vllm.entrypoints") for a in argv[:4])


def _read_vllm_processes(root: Root) -> tuple[VllmProcess, ...]:
    proc = root.file("/proc")
    if not input_files.is_dir(proc):
        return ()
    own = os.getpid() if root.is_real else None
    found = []
    for entry in input_files.list_dir(proc, "process list"):
        pid = int_or_none(entry.name, lo=1, hi=1 << 32) if entry.name.isascii() else None
        if pid is None or pid == own:
            continue
        raw = root.read_text(f"/proc/{entry.name}/cmdline")
        if not raw:
            continue
        argv = [a for a in raw.split("\x00") if a]
        if not _is_vllm(argv):
            continue
        adj_text = root.read_text(f"/proc/{entry.name}/oom_score_adj")
        adj = int_or_none(adj_text, lo=-1000, hi=1000) if adj_text else None
        found.append(VllmProcess(pid, redact_argv(argv), adj))
    return tuple(sorted(found, key=lambda p: p.pid))


@contextlib.contextmanager
def _lines(path: str, what: str):
    """(line_no, text) of a capture file, streamed with the log reader's bounds (long lines cut)."""
    from oomguard.inputs.logs import ReadNotes, iter_text_lines

    stream = input_files.open_stream(path, what=what, limit=input_files.CAPTURE_BYTES)
    try:
        yield iter_text_lines(stream, ReadNotes())
    finally:
        stream.close()


def _read_gpus(root: Root, nvidia_smi_file: str | None, notes: list[str]) -> GpuSnapshot | None:
    if nvidia_smi_file:
        # Streamed: a series (nvidia-smi -l 1 for days) is kept as one entry per GPU and process.
        with _lines(nvidia_smi_file, "nvidia-smi output") as lines:
            snap = parse_nvidia_smi_csv(lines, nvidia_smi_file)
        series = [d for d in snap.devices if d.samples > 1]
        if series:
            notes.append(f"{nvidia_smi_file}: a series of {max(d.samples for d in series):,} samples per GPU; "
                         "the last sample is the GPUs' state, the peak is in the JSON (peak_used_bytes)")
        if snap.processes_dropped:
            notes.append(f"{nvidia_smi_file}: {snap.processes_dropped:,} process rows past the first "
                         f"{len(snap.processes):,} distinct processes not kept")
        return snap
    if not root.is_real:
        notes.append("GPUs not queried under a fake root; pass --nvidia-smi FILE")
        return None
    if NvmlSource.available():
        try:
            return NvmlSource().snapshot()
        except Exception as exc:  # NVML present but no driver: fall through to nvidia-smi
            notes.append(f"NVML failed: {exc}")
    if NvidiaSmiSource.available():
        try:
            return NvidiaSmiSource().snapshot()
        except (RuntimeError, OSError, InputError, TimeoutError) as exc:
            notes.append(f"nvidia-smi failed: {exc}")
            return None
    notes.append("no NVML (pip install nvidia-ml-py) and no nvidia-smi: GPU processes unknown")
    return None


def _read_topology(root: Root, topo_file: str | None, notes: list[str]) -> Topology | None:
    if topo_file:
        with _lines(topo_file, "topology output") as lines:
            return parse_topology(lines, topo_file)
    if root.is_real and NvidiaSmiSource.available():
        try:
            return parse_topology(NvidiaSmiSource().topology_text(), "nvidia-smi topo -m")
        except (RuntimeError, OSError, InputError) as exc:
            notes.append(f"nvidia-smi topo -m failed: {exc}")
            return None
    notes.append("no GPU topology; pass --topo FILE (the output of nvidia-smi topo -m)")
    return None


def read_host_facts(
    root: Root | str = "/",
    *,
    topo_file: str | None = None,
    nvidia_smi_file: str | None = None,
) -> HostFacts:
    root = root if isinstance(root, Root) else Root(root)
    notes: list[str] = []
    meminfo_text = root.read_text("/proc/meminfo")
    if meminfo_text is None:
        raise InputError("cannot read /proc/meminfo", file=root.display("/proc/meminfo"))
    meminfo = parse_meminfo(meminfo_text, root.display("/proc/meminfo"))
    if meminfo.available_estimated:
        notes.append("no MemAvailable (kernel < 3.14): estimated as MemFree + Cached + Buffers")

    swaps_text = root.read_text("/proc/swaps")
    swaps = parse_swaps(swaps_text, root.display("/proc/swaps")) if swaps_text else ()

    overcommit = root.read_int("/proc/sys/vm/overcommit_memory")
    max_map = root.read_int("/proc/sys/vm/max_map_count")
    for name, value in (("vm.overcommit_memory", overcommit), ("vm.max_map_count", max_map)):
        if value is None:
            notes.append(f"{name} unreadable")

    nofile_soft, nofile_hard = _read_nofile(root, notes)
    return HostFacts(
        root=str(root.path),
        meminfo=meminfo,
        overcommit_memory=overcommit,
        overcommit_ratio=root.read_int("/proc/sys/vm/overcommit_ratio"),
        max_map_count=max_map,
        swaps=swaps,
        cgroup=read_cgroup_memory(root),
        container=detect_container(root),
        shm=_read_shm(root, meminfo.mem_total_bytes, notes),
        nofile_soft=nofile_soft,
        nofile_hard=nofile_hard,
        numa_nodes=_read_numa(root),
        gpus=_read_gpus(root, nvidia_smi_file, notes),
        topology=_read_topology(root, topo_file, notes),
        vllm_processes=_read_vllm_processes(root),
        notes=tuple(notes),
    )
