"""The watch's /metrics pre-filter reads what the probe's parser reads, for a fraction of the cost."""

from __future__ import annotations

import asyncio

from watch_fakes import METRICS_TEXT, render_metrics

from oomguard.probe.classes import ProbeClass, Source
from oomguard.probe.client import ClientFailure
from oomguard.probe.metrics import parse_metrics
from oomguard.watch.alerts import AlertRule, AlertTracker, Signal
from oomguard.watch.scrape import (
    WatchMetricsSampler,
    filter_metrics,
    kv_usage_by_engine,
)

OLD_STYLE = """# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:gpu_cache_usage_perc{engine="1",model_name="m"} 0.75
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 4.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="m"} 0.0
"""


def test_filter_keeps_exactly_what_parse_metrics_reads():
    for text in (METRICS_TEXT, render_metrics(kv=0.42, running=5, waiting=2, preemptions=7), OLD_STYLE):
        small = filter_metrics(text)
        full, cut = parse_metrics(text), parse_metrics(small)
        assert cut.values == full.values
        assert (cut.num_gpu_blocks, cut.block_size) == (full.num_gpu_blocks, full.block_size)
        assert len(small) <= len(text)
    assert len(filter_metrics(METRICS_TEXT)) < len(METRICS_TEXT) / 10
    assert parse_metrics(filter_metrics(METRICS_TEXT)).kv_cache_tokens == 131072


def test_per_engine_kv_usage_and_alert_keys():
    assert kv_usage_by_engine(OLD_STYLE) == {"0": 0.25, "1": 0.75}

    class Client:
        async def get(self, path, api=True, timeout=None):
            return 200, OLD_STYLE

        async def aclose(self):
            return None

    sampler = WatchMetricsSampler(Client())
    samples = asyncio.run(sampler.sample(1.0))
    keys = {s.key: s.values for s in samples}
    assert keys["engine"]["kv_cache_usage"] == 0.75 and keys["engine"]["running"] == 7
    assert keys["engine0"] == {"kv_cache_usage": 0.25} and keys["engine1"] == {"kv_cache_usage": 0.75}
    assert all(s.source is Source.METRICS for s in samples)
    tr = AlertTracker(AlertRule(Signal.KV_USAGE, 0.5, 0))
    assert [t.key for k, v in keys.items() if k != "engine" for t in tr.observe(k, 1.0, v["kv_cache_usage"])] == [
        "engine1"
    ]


def test_failures_keep_their_reason():
    class Refusing:
        async def get(self, path, api=True, timeout=None):
            raise ClientFailure(ProbeClass.UNREACHABLE, "connection refused: nothing listens on that host and port")

        async def aclose(self):
            return None

    sampler = WatchMetricsSampler(Refusing())
    assert asyncio.run(sampler.sample(0.0)) == []
    assert asyncio.run(sampler.sample(1.0)) == []
    assert sampler.consecutive_failures == 2 and sampler.errors == 2
    assert sampler.last_error.startswith("connection refused")
