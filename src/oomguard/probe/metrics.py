"""vLLM's ``/metrics``: KV-cache usage, queue lengths, preemptions, prefix-cache counters.

Parsed with ``prometheus_client``'s text parser. Names changed across vLLM
versions: ``vllm:gpu_cache_usage_perc`` became ``vllm:kv_cache_usage_perc``;
``vllm:gpu_prefix_cache_hit_rate`` (a gauge) became the
``vllm:prefix_cache_hits`` / ``vllm:prefix_cache_queries`` counters. Both
spellings are read. With several engines (data parallel) counters and queue
lengths are summed and usage takes the fullest engine.

``vllm:cache_config_info`` carries the pool's ``num_gpu_blocks`` and
``block_size`` as labels: the KV pool the server actually allocated, which the
plan comparison uses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from oomguard.probe.classes import Source
from oomguard.probe.samplers import Sample

if TYPE_CHECKING:
    from oomguard.probe.client import ProbeClient

# value name -> (metric names, newest first; how to combine engines)
_GAUGES = {
    "kv_cache_usage": (("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"), max),
    "running": (("vllm:num_requests_running",), sum),
    "waiting": (("vllm:num_requests_waiting",), sum),
    "prefix_cache_hit_rate": (("vllm:gpu_prefix_cache_hit_rate",), max),
}
_COUNTERS = {
    "preemptions_total": ("vllm:num_preemptions",),
    "prefix_cache_hits_total": ("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits"),
    "prefix_cache_queries_total": ("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries"),
    "prompt_tokens_total": ("vllm:prompt_tokens",),
    "generation_tokens_total": ("vllm:generation_tokens",),
}


@dataclass
class MetricsReading:
    values: dict[str, float] = field(default_factory=dict)
    num_gpu_blocks: int | None = None
    block_size: int | None = None

    @property
    def kv_cache_tokens(self) -> int | None:
        if self.num_gpu_blocks and self.block_size:
            return self.num_gpu_blocks * self.block_size
        return None


def _base(name: str) -> str:
    for suffix in ("_total", "_created"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


_WANTED = frozenset(
    [n for names, _ in _GAUGES.values() for n in names]
    + [n for names in _COUNTERS.values() for n in names]
    + ["vllm:cache_config_info"]
)


def _wanted_pattern() -> re.Pattern[str]:
    names = "|".join(re.escape(n) for n in sorted(_WANTED, key=len, reverse=True))
    # A sample line (name, optional _total, then labels or a space) or its # TYPE / # HELP line.
    return re.compile(rf"^(?:# (?:TYPE|HELP) )?(?:{names})(?:_total)?[{{ ].*$", re.MULTILINE)


_WANTED_LINE = _wanted_pattern()


def wanted_lines(text: str) -> str:
    """Only the series we read: vLLM's page is ~50 kB, mostly histograms, and parsing it
    all costs ~10 ms per scrape, the largest part of the probe's own CPU. The regex
    scan runs in C; the parser then sees a few dozen lines."""
    return "\n".join(_WANTED_LINE.findall(text)) + "\n"


def parse_metrics(text: str) -> MetricsReading:
    """Read the series the probe needs from Prometheus text. Unknown series are ignored."""
    from prometheus_client.parser import text_string_to_metric_families

    by_name: dict[str, list[float]] = {}
    reading = MetricsReading()
    for family in text_string_to_metric_families(wanted_lines(text)):
        for s in family.samples:
            if s.name.endswith("_created"):
                continue
            name = _base(s.name)
            if name == "vllm:cache_config_info":
                reading.num_gpu_blocks = _int_label(s.labels, "num_gpu_blocks", reading.num_gpu_blocks)
                reading.block_size = _int_label(s.labels, "block_size", reading.block_size)
                continue
            by_name.setdefault(name, []).append(float(s.value))
    for key, (names, combine) in _GAUGES.items():
        for name in names:
            if name in by_name:
                reading.values[key] = float(combine(by_name[name]))
                break
    for key, names in _COUNTERS.items():
        for name in names:
            if name in by_name:
                reading.values[key] = float(sum(by_name[name]))
                break
    return reading


def _int_label(labels: dict[str, str], key: str, default: int | None) -> int | None:
    try:
        return int(float(labels[key]))
    except (KeyError, ValueError, TypeError):
        return default


class MetricsSampler:
    """Polls ``/metrics`` on its own one-connection client, apart from the load's pool."""

    source = Source.METRICS
    name = "metrics"

    def __init__(self, client: ProbeClient, timeout_s: float = 5.0):
        self._client = client
        self._timeout_s = timeout_s
        self.last: MetricsReading | None = None
        self.errors = 0

    async def sample(self, t: float) -> list[Sample]:
        import time

        from oomguard.probe.client import ClientFailure

        start = time.perf_counter()
        try:
            status, body = await self._client.get("/metrics", api=False, timeout=self._timeout_s)
        except ClientFailure:
            self.errors += 1
            return []
        if status != 200 or not isinstance(body, str):
            self.errors += 1
            return []
        try:
            reading = parse_metrics(body)
        except Exception:  # noqa: BLE001 - a garbled scrape must not stop the probe
            self.errors += 1
            return []
        self.last = reading
        # A busy server answers late; stamp the reading when it arrived, not when it was asked for.
        t += time.perf_counter() - start
        values: dict[str, Any] = dict(reading.values)
        if reading.kv_cache_tokens:
            values["kv_cache_tokens"] = float(reading.kv_cache_tokens)
        return [Sample(t, self.source, "engine", values)]

    async def close(self) -> None:
        await self._client.aclose()
