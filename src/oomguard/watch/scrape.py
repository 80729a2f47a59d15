"""``/metrics`` for a long-running watch: the probe's sampler, made cheap and talkative.

Two differences from ``probe.metrics.MetricsSampler``, which this extends:

- The scrape text is cut down to the families the watch reads before it is
  parsed (a vLLM server exposes ~50 kB of histograms per engine; parsing all
  of it every second would cost the watch more CPU than everything else).
- The reason of the last failed scrape is kept (connection refused, timeout,
  HTTP 503), so that "the server went away" can say how.

It also reads KV usage per engine (data-parallel servers have several).
"""

from __future__ import annotations

import re
from typing import Any

from oomguard.probe.metrics import cache_config_values, MetricsSampler, parse_metrics, wanted_lines
from oomguard.probe.samplers import Sample

_KV_ENGINE = re.compile(r'^vllm:(?:kv|gpu)_cache_usage_perc\{[^}]*engine="([^"]+)"[^}]*\}\s+(\S+)', re.MULTILINE)


def filter_metrics(text: str) -> str:
    """Only the lines of the families the probe's parser reads (one list, in probe/metrics.py)."""
    return wanted_lines(text)


def kv_usage_by_engine(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for engine, value in _KV_ENGINE.findall(text):
        try:
            out[engine] = max(out.get(engine, 0.0), float(value))
        except ValueError:
            continue
    return out


class WatchMetricsSampler(MetricsSampler):
    """``MetricsSampler`` with a pre-filter, per-engine KV usage and the last failure kept."""

    def __init__(self, client: Any, timeout_s: float = 5.0):
        super().__init__(client, timeout_s)
        self.last_error: str | None = None
        self.consecutive_failures = 0
        self.successes = 0  # scrapes that answered: none yet means the server was never reached
        self.unreachable = False
        self.engines: dict[str, float] = {}

    def _fail(self, reason: str, unreachable: bool = False) -> list[Sample]:
        self.unreachable = unreachable  # nothing listens / no route (not: answered badly or too slowly)
        self.errors += 1
        self.consecutive_failures += 1
        self.last_error = reason
        return []

    async def sample(self, t: float) -> list[Sample]:
        from oomguard.probe.client import ClientFailure

        try:
            status, body = await self._client.get("/metrics", api=False, timeout=self._timeout_s)
        except ClientFailure as exc:
            from oomguard.probe.classes import ProbeClass

            return self._fail(exc.detail, unreachable=exc.cls is ProbeClass.UNREACHABLE)
        if status != 200 or not isinstance(body, str):
            return self._fail(f"/metrics answered HTTP {status}")
        small = filter_metrics(body)
        try:
            reading = parse_metrics(small)
        except Exception as exc:  # noqa: BLE001 - a garbled scrape must not stop the watch
            return self._fail(f"/metrics not parseable: {exc}")
        self.consecutive_failures = 0
        self.successes += 1
        self.last = reading
        self.engines = kv_usage_by_engine(small)
        values: dict[str, float] = dict(reading.values)
        values.update(cache_config_values(reading))
        out = [Sample(t, self.source, "engine", values)]
        if len(self.engines) > 1:
            out += [
                Sample(t, self.source, f"engine{e}", {"kv_cache_usage": v}) for e, v in sorted(self.engines.items())
            ]
        return out
