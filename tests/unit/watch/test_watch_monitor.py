"""The watch loop against a loopback server serving recorded vLLM /metrics.

The server is this test process (a thread), so every test watches it as a
"remote" server (``local=False``): /metrics only, plus scripted fake GPU
samplers. The real NVML is not exercised (this machine has no NVIDIA driver);
the GPU sampler here only feeds the monitor NVML-shaped samples.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from watch_fakes import FakeVllmServer, refused_port

from oomguard.probe.classes import Source
from oomguard.probe.client import normalize_base_url
from oomguard.probe.samplers import Sample
from oomguard.watch.config import WatchConfig
from oomguard.watch.drift import DriftCheck, PlanReference
from oomguard.watch.events import EventKind
from oomguard.watch.monitor import EndReason, Monitor
from oomguard.watch.sources import open_sources
from oomguard.watch.steps import Pattern
from oomguard.watch.summary import summary_json, summary_text

GiB = 1 << 30


class StairGpu:
    """NVML-shaped samples: a 24 GiB card climbing in steps every ``every_s`` (S2)."""

    source = Source.NVML
    name = "nvml"

    def __init__(self, levels_gib=(17.5, 18.6, 20.1, 23.4), every_s=0.6):
        self.levels = levels_gib
        self.every_s = every_s
        self.zero = time.perf_counter()

    async def sample(self, t):
        i = min(int((time.perf_counter() - self.zero) / self.every_s), len(self.levels) - 1)
        return [Sample(t, self.source, "gpu0", {"used_bytes": self.levels[i] * GiB, "total_bytes": 24.0 * GiB})]

    async def close(self):
        return None


def config(url, **kw):
    base = dict(url=normalize_base_url(url), interval_s=0.1, duration_s=5.0, hold_s=0.3, local=False, gone_after_s=0.5)
    base.update(kw)
    return WatchConfig(**base)


def run(cfg, extra=(), drift=None):
    async def go():
        sources = open_sources(cfg)
        for s in extra:
            sources.samplers.append(s)
            sources.note(s.name, s.source, "fake", True)
        return await Monitor(cfg, sources, drift=drift).run(asyncio.Event())

    return asyncio.run(go())


def test_samples_alerts_and_duration_bound():
    with FakeVllmServer() as srv:
        srv.kv, srv.running, srv.waiting = 0.93, 8, 3
        started = time.monotonic()
        res = run(config(srv.base_url, duration_s=1.5))
        elapsed = time.monotonic() - started
    assert res.ended_by is EndReason.DURATION
    assert 1.4 <= elapsed < 4.0
    assert res.state.samples_by_source["metrics"] >= 8
    kinds = [e.kind for e in res.events]
    assert EventKind.ALERT_FIRING in kinds
    fired = next(e for e in res.events if e.kind is EventKind.ALERT_FIRING)
    assert fired.data["rule"] == "kv-cache-high" and fired.t - fired.data["since"] >= 0.3
    d = summary_json(res)
    assert d["peaks"]["engine"]["kv_cache_usage"]["value"] == pytest.approx(0.93)
    assert d["peaks"]["engine"]["running"]["value"] == 8
    assert d["alerts"][0]["resolved_at"] is None  # still firing at the end
    for key in ("base_url", "started_at", "duration_s", "interval_s", "ended_by", "sources", "peaks", "patterns",
                "alerts", "events", "server_gone", "plan_comparison", "timelines"):
        assert key in d


def test_below_threshold_or_too_short_does_not_fire():
    with FakeVllmServer() as srv:
        srv.kv = 0.5
        res = run(config(srv.base_url, duration_s=0.8))
    assert not res.alerts_fired
    with FakeVllmServer() as srv:
        srv.kv = 0.99
        res = run(config(srv.base_url, duration_s=0.8, hold_s=30))
    assert not res.alerts_fired
    assert summary_json(res)["alerts"][0]["state"] == "pending"


def test_server_going_away_ends_cleanly_with_last_samples():
    srv = FakeVllmServer()
    srv.kv = 0.4

    async def go():
        cfg = config(srv.base_url, duration_s=30)
        mon = Monitor(cfg, open_sources(cfg))
        loop = asyncio.get_running_loop()
        loop.call_later(0.6, srv.close)
        return await mon.run(asyncio.Event())

    started = time.monotonic()
    res = asyncio.run(go())
    assert time.monotonic() - started < 5
    assert res.ended_by is EndReason.SERVER_GONE
    assert "connection refused" in res.gone["reason"]
    assert res.gone["last_samples"]["engine"]["kv_cache_usage"] == pytest.approx(0.4)
    assert res.events[-1].kind is EventKind.SERVER_GONE
    assert "server gone" in summary_text(res)


def test_hung_server_is_bounded_by_timeouts():
    with FakeVllmServer() as srv:
        srv.hang = True
        started = time.monotonic()
        # interval 0.1 s -> every scrape is cut at 2 s; gone after 0.5 s of failures and two failed scrapes
        res = run(config(srv.base_url, duration_s=60))
        elapsed = time.monotonic() - started
    assert res.ended_by is EndReason.SERVER_GONE
    assert "did not answer" in res.gone["reason"] or "timed out" in res.gone["reason"]
    assert elapsed < 10


def test_unreachable_at_start():
    res = run(config(f"http://127.0.0.1:{refused_port()}", duration_s=60))
    assert res.ended_by is EndReason.UNREACHABLE
    assert res.state.ticks == 1
    assert "connection refused" in res.gone["reason"]


def test_gpu_alert_and_s2_step_pattern():
    with FakeVllmServer() as srv:
        res = run(config(srv.base_url, duration_s=3.0, alert_gpu_mem=0.95, hold_s=0.2), extra=[StairGpu()])
    pat = summary_json(res)["patterns"]["gpu0"]
    assert pat["pattern"] == "steps" and len(pat["steps"]) == 3
    assert [round(s["after"], 1) for s in pat["steps"]] == [18.6, 20.1, 23.4]
    fired = [e for e in res.events if e.kind is EventKind.ALERT_FIRING]
    assert fired and fired[0].data["key"] == "gpu0" and fired[0].data["value"] == pytest.approx(23.4 / 24)
    text = summary_text(res)
    assert "gpu0: climbing in 3 steps" in text and "S2 pattern" in text


def test_preemptions_become_one_event_per_burst():
    with FakeVllmServer() as srv:
        srv.preemptions = 10

        async def go():
            cfg = config(srv.base_url, duration_s=1.5)
            loop = asyncio.get_running_loop()
            for i, at in enumerate((0.3, 0.5, 0.7)):
                loop.call_later(at, setattr, srv, "preemptions", 10 + 5 * (i + 1))
            return await Monitor(cfg, open_sources(cfg)).run(asyncio.Event())

        res = asyncio.run(go())
    pre = [e for e in res.events if e.kind is EventKind.PREEMPTIONS]
    assert sum(e.data["new"] for e in pre) == 15
    assert len(pre) == 2  # the first burst at once, the rest coalesced and flushed at the end
    assert res.state.preemptions_during == 15


def test_drift_against_the_plan():
    with FakeVllmServer() as srv:
        ok = DriftCheck(PlanReference(kv_cache_tokens=131072, budget_bytes_per_gpu=[22 * GiB]))
        res = run(config(srv.base_url, duration_s=0.5, alert_gpu_mem=None), drift=ok)
        assert not [e for e in res.events if e.kind is EventKind.DRIFT]
        assert summary_json(res)["plan_comparison"]["live_kv_cache_tokens"] == 131072

        off = DriftCheck(PlanReference(kv_cache_tokens=327680, budget_bytes_per_gpu=[20 * GiB]))
        res = run(config(srv.base_url, duration_s=2.6, alert_gpu_mem=None), extra=[StairGpu()], drift=off)
    drift = [e for e in res.events if e.kind is EventKind.DRIFT]
    assert any("KV pool drift" in e.message and e.data["predicted_tokens"] == 327680 for e in drift)
    assert any(e.data.get("gpu") == "gpu0" for e in drift)  # 23.4 GiB > 20 GiB budget + margin
    pc = summary_json(res)["plan_comparison"]
    assert pc["pool_difference"] == pytest.approx(131072 / 327680 - 1, abs=1e-3)
    assert "pool" in pc["warnings"] and "budget-gpu0" in pc["warnings"]


def test_stop_event_ends_promptly():
    with FakeVllmServer() as srv:

        async def go():
            cfg = config(srv.base_url, duration_s=None, interval_s=1.0)
            stop = asyncio.Event()
            asyncio.get_running_loop().call_later(0.3, stop.set)
            return await Monitor(cfg, open_sources(cfg)).run(stop)

        started = time.monotonic()
        res = asyncio.run(go())
    assert res.ended_by is EndReason.INTERRUPT
    assert time.monotonic() - started < 2.5
