"""Pick the samplers a watch can use on this host (the probe's classes, reused).

``/metrics`` always (a server without it can still be watched for GPU memory
and RSS); on the server's own host also NVML (else ``nvidia-smi``), the
server's process tree RSS, and new kernel OOM-killer lines. What is missing
is recorded with the reason, and the summary says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oomguard.probe.classes import Source
from oomguard.probe.samplers import MemorySampler


@dataclass
class SourceStatus:
    name: str
    source: str
    active: bool
    note: str
    samples: int = 0
    errors: int = 0
    skipped_busy: int = 0
    last_error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Sources:
    samplers: list[MemorySampler] = field(default_factory=list)
    status: dict[str, SourceStatus] = field(default_factory=dict)
    metrics: Any = None  # the WatchMetricsSampler
    tree: Any = None  # probe.samplers.ProcessTree of the server, when local
    gpu_names: list[str] = field(default_factory=list)

    def note(self, name: str, source: Source, text: str, active: bool) -> None:
        self.status[name] = SourceStatus(name, source.value, active, text)


def metrics_client(config: Any):
    from oomguard.probe.client import ProbeClient, Timeouts
    from oomguard.probe.runner import is_local_host

    t = config.http_timeout_s
    local = is_local_host(config.url.host)
    return ProbeClient(
        config.url,
        config.api_key,
        timeouts=Timeouts(connect=min(3.0, t), read=t, write=t, pool=t),
        trust_env=not local,  # a stale HTTP_PROXY must not stand between us and localhost
        max_connections=1,
    )


def open_sources(config: Any, *, client: Any = None) -> Sources:
    from oomguard.probe.kernel import KernelOomSampler
    from oomguard.probe.runner import is_local_host
    from oomguard.probe.samplers import (
        NvidiaSmiSampler,
        NvmlSampler,
        ProcessTree,
        RssSampler,
        find_server_pid,
    )
    from oomguard.watch.scrape import WatchMetricsSampler

    src = Sources()
    src.metrics = WatchMetricsSampler(client or metrics_client(config), timeout_s=config.http_timeout_s)
    src.samplers.append(src.metrics)
    src.note("metrics", Source.METRICS, f"{config.url.root}/metrics", True)

    local = config.local if config.local is not None else is_local_host(config.url.host)
    if not local:
        why = "server is on another host: run oomguard watch there for GPU, RSS and kernel sampling"
        for name, s in (("gpu", Source.NVML), ("rss", Source.RSS), ("kernel", Source.KERNEL)):
            src.note(name, s, why, False)
        return src

    pid = config.server_pid or find_server_pid(config.url.port)
    if pid:
        try:
            src.tree = ProcessTree(pid)
        except Exception as exc:  # noqa: BLE001 - NoSuchProcess / AccessDenied
            src.note("rss", Source.RSS, f"server pid {pid}: {exc}", False)
    if src.tree is not None:
        src.samplers.append(RssSampler(src.tree))
        src.note("rss", Source.RSS, f"server pid {pid} ({src.tree.name}) and its children", True)
    elif "rss" not in src.status:
        src.note("rss", Source.RSS, f"no process listens on port {config.url.port} here (try --server-pid)", False)

    pids = src.tree.pids if src.tree is not None else None
    gpu, why = NvmlSampler.create(pids)
    if gpu is not None:
        src.samplers.append(gpu)
        src.gpu_names = list(gpu.gpu_names)
        src.note("nvml", Source.NVML, why, True)
    else:
        smi, why_smi = NvidiaSmiSampler.create()
        if smi is not None:
            src.samplers.append(smi)
            src.note("nvidia-smi", Source.NVIDIA_SMI, f"{why_smi} (NVML: {why})", True)
        else:
            src.note("gpu", Source.NVML, f"no GPU sampler: {why}; {why_smi}", False)

    kernel, why_k = KernelOomSampler.create()
    if kernel is not None:
        src.samplers.append(kernel)
    src.note("kernel", Source.KERNEL, why_k, kernel is not None)
    return src
