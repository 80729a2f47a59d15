"""Everything the watch has seen so far, in bounded memory.

Samples from all sources are folded into timelines keyed ``<key>.<value>``
(``gpu0.used_bytes``, ``engine.kv_cache_usage``, ``server.rss_bytes``), the
latest reading of each key is kept for the live view and for the "last
samples" of a server-gone report, and counter-like values (preemptions)
become events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oomguard.probe.classes import Source
from oomguard.probe.samplers import Sample
from oomguard.watch.events import Event, EventKind, Severity
from oomguard.watch.timeline import Timeline

# which values get a timeline (the rest are kept as "latest" only)
_TRACKED = {
    Source.NVML: ("used_bytes", "server_bytes"),
    Source.NVIDIA_SMI: ("used_bytes",),
    Source.METRICS: ("kv_cache_usage", "running", "waiting"),
    Source.RSS: ("rss_bytes", "host_available_bytes"),
}
PREEMPTION_COALESCE_S = 30.0


@dataclass
class Latest:
    t: float
    source: str
    values: dict[str, float]


@dataclass
class WatchState:
    history_points: int = 2048
    spark_points: int = 40
    timelines: dict[str, Timeline] = field(default_factory=dict)
    latest: dict[str, Latest] = field(default_factory=dict)
    samples_by_source: dict[str, int] = field(default_factory=dict)
    ticks: int = 0
    oom_lines: list[str] = field(default_factory=list)
    preemptions_first: float | None = None
    preemptions_last: float | None = None
    _preempt_pending: float = 0.0
    _preempt_emitted_at: float | None = None
    kv_pool_tokens: int | None = None  # from vllm:cache_config_info, one engine
    kv_pool_blocks: int | None = None  # num_gpu_blocks of one engine
    kv_max_concurrency: float | None = None  # vLLM's own figure (0.24+)
    kv_block_size: int | None = None

    def timeline(self, name: str) -> Timeline:
        tl = self.timelines.get(name)
        if tl is None:
            tl = self.timelines[name] = Timeline(self.history_points, self.spark_points)
        return tl

    def gpu_keys(self) -> list[str]:
        keys = {k for k, v in self.latest.items() if v.source in (Source.NVML.value, Source.NVIDIA_SMI.value)}
        return sorted(keys, key=lambda k: int(k[3:]) if k[3:].isdigit() else 0)

    def engine_keys(self) -> list[str]:
        return sorted(
            k
            for k, v in self.latest.items()
            if v.source == Source.METRICS.value and k.startswith("engine") and k != "engine"
        )

    def value(self, key: str, name: str) -> float | None:
        lt = self.latest.get(key)
        return None if lt is None else lt.values.get(name)

    def ingest(self, t: float, samples: list[Sample]) -> list[Event]:
        """Fold one tick's samples in; return the events they imply."""
        self.ticks += 1
        events: list[Event] = []
        for s in samples:
            src = s.source.value
            self.samples_by_source[src] = self.samples_by_source.get(src, 0) + 1
            if s.source is Source.KERNEL:
                self.oom_lines.append(s.text or "")
                events.append(
                    Event(s.t, EventKind.OOM_KILL, Severity.CRITICAL, f"kernel OOM killer: {s.text}", {"line": s.text})
                )
                continue
            self.latest[s.key] = Latest(s.t, src, dict(s.values))
            if s.source is Source.RSS and not s.values.get("num_processes", 1):
                continue  # the process tree is gone: a zero RSS is not a reading
            for name in _TRACKED.get(s.source, ()):
                if name in s.values:
                    self.timeline(f"{s.key}.{name}").add(s.t, float(s.values[name]))
            if s.source is Source.METRICS and s.key == "engine":
                if "kv_cache_tokens" in s.values:
                    self.kv_pool_tokens = int(s.values["kv_cache_tokens"])
                if "kv_num_gpu_blocks" in s.values:
                    self.kv_pool_blocks = int(s.values["kv_num_gpu_blocks"])
                if "kv_block_size" in s.values:
                    self.kv_block_size = int(s.values["kv_block_size"])
                if "kv_max_concurrency" in s.values:
                    self.kv_max_concurrency = float(s.values["kv_max_concurrency"])
                if "preemptions_total" in s.values:
                    events += self._preemptions(s.t, float(s.values["preemptions_total"]))
        events += self._flush_preemptions(t, force=False)
        return events

    def _preemptions(self, t: float, total: float) -> list[Event]:
        if self.preemptions_first is None:
            self.preemptions_first = self.preemptions_last = total
            return []
        prev = self.preemptions_last if self.preemptions_last is not None else total
        delta = total - prev if total >= prev else total  # a restarted server resets the counter
        self.preemptions_last = total
        if delta > 0:
            self._preempt_pending += delta
        return []

    def _flush_preemptions(self, t: float, *, force: bool) -> list[Event]:
        """One event per burst: the first preemptions at once, then at most one every 30 s."""
        if self._preempt_pending <= 0:
            return []
        due = self._preempt_emitted_at is None or t - self._preempt_emitted_at >= PREEMPTION_COALESCE_S
        if not (due or force):
            return []
        n = int(self._preempt_pending)
        self._preempt_pending = 0.0
        self._preempt_emitted_at = t
        total = int(self.preemptions_last or 0)
        return [
            Event(
                t,
                EventKind.PREEMPTIONS,
                Severity.WARNING,
                f"{n} preemption(s) (server total {total}): the KV cache cannot hold the running batch; "
                "requests are being recomputed",
                {"new": n, "total": total},
            )
        ]

    def finish(self, t: float) -> list[Event]:
        return self._flush_preemptions(t, force=True)

    @property
    def preemptions_during(self) -> int:
        if self.preemptions_first is None or self.preemptions_last is None:
            return 0
        return int(max(0.0, self.preemptions_last - self.preemptions_first))

    def last_samples(self) -> dict[str, Any]:
        return {k: {"t": round(v.t, 3), "source": v.source, **v.values} for k, v in sorted(self.latest.items())}
