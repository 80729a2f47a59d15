"""vLLM's ``/metrics``: KV-cache usage, queue lengths, preemptions, prefix-cache counters.

Parsed with ``prometheus_client``'s text parser. Names changed across vLLM
versions: ``vllm:gpu_cache_usage_perc`` became ``vllm:kv_cache_usage_perc``;
``vllm:gpu_prefix_cache_hit_rate`` (a gauge) became the
``vllm:prefix_cache_hits`` / ``vllm:prefix_cache_queries`` counters. Both
spellings are read. With several engines (data parallel) counters and queue
lengths are summed and usage takes the fullest engine.

``vllm:cache_config_info`` is a gauge fixed at 1 whose labels are every
``CacheConfig`` field (``CacheConfig.metrics_info``), one series per engine
(label ``engine``): ``num_gpu_blocks`` and ``block_size`` on every release;
from 0.24 also ``kv_cache_size_tokens`` and ``kv_cache_max_concurrency``, the
numbers of vLLM's "GPU KV cache size" / "Maximum concurrency" log lines, per
data-parallel engine and group-aware (``num_gpu_blocks x block_size`` over-counts
hybrid models). From 0.20 ``num_gpu_blocks`` is the SUM over the DP engines
(``core_client.py``: ``num_gpu_blocks += response.num_gpu_blocks``), so the
per-engine pool is that over the engine count. Read in vLLM 0.10.2-0.33.0's
``v1/metrics/loggers.py::log_metrics_info`` and ``config/cache.py``.
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
    num_gpu_blocks: int | None = None  # as exported: the sum over DP engines from 0.20
    block_size: int | None = None
    kv_cache_size_tokens: int | None = None  # per engine, group-aware (0.24+)
    kv_cache_max_concurrency: float | None = None  # per engine, at max_model_len (0.24+)
    num_engines: int = 1  # cache_config_info series (label engine)

    @property
    def kv_cache_tokens(self) -> int | None:
        """One engine's KV pool in tokens: vLLM's own figure when exported, else blocks x block size."""
        if self.kv_cache_size_tokens:
            return self.kv_cache_size_tokens
        if self.num_gpu_blocks and self.block_size:
            return self.num_gpu_blocks * self.block_size // max(1, self.num_engines)
        return None

    @property
    def num_gpu_blocks_per_engine(self) -> int | None:
        return None if not self.num_gpu_blocks else self.num_gpu_blocks // max(1, self.num_engines)


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
    engines: set[str] = set()
    for family in text_string_to_metric_families(wanted_lines(text)):
        for s in family.samples:
            if s.name.endswith("_created"):
                continue
            name = _base(s.name)
            if name == "vllm:cache_config_info":
                reading.num_gpu_blocks = _int_label(s.labels, "num_gpu_blocks", reading.num_gpu_blocks)
                reading.block_size = _int_label(s.labels, "block_size", reading.block_size)
                reading.kv_cache_size_tokens = _int_label(s.labels, "kv_cache_size_tokens", reading.kv_cache_size_tokens)
                reading.kv_cache_max_concurrency = _float_label(s.labels, "kv_cache_max_concurrency", reading.kv_cache_max_concurrency)
                engines.add(s.labels.get("engine", ""))
                continue
            by_name.setdefault(name, []).append(float(s.value))
    reading.num_engines = max(1, len(engines))
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


def cache_config_values(reading: MetricsReading) -> dict[str, float]:
    """The KV pool of one engine as sample values: tokens, blocks, block size, concurrency (what is exported)."""
    out: dict[str, float] = {}
    if reading.kv_cache_tokens:
        out["kv_cache_tokens"] = float(reading.kv_cache_tokens)
    if reading.num_gpu_blocks_per_engine:
        out["kv_num_gpu_blocks"] = float(reading.num_gpu_blocks_per_engine)
    if reading.block_size:
        out["kv_block_size"] = float(reading.block_size)
    if reading.kv_cache_max_concurrency is not None:
        out["kv_max_concurrency"] = float(reading.kv_cache_max_concurrency)
    return out


def _float_label(labels: dict[str, str], key: str, default: float | None) -> float | None:
    try:
        return float(labels[key])
    except (KeyError, ValueError, TypeError):
        return default


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
        values.update(cache_config_values(reading))
        return [Sample(t, self.source, "engine", values)]

    async def close(self) -> None:
        await self._client.aclose()
