"""The watch loop against a loopback server serving recorded vLLM /metrics.

The server is this test process (a thread), so every test watches it as a
"remote" server (``local=False``): /metrics only, plus scripted fake GPU
samplers. The real NVML is not exercised (this machine has no NVIDIA driver);
the GPU sampler here only feeds the monitor NVML-shaped samples.

Load is scripted per scrape (not per wall-clock second) and runs stop after a
number of scrapes, so the tests hold on a slow, busy machine.
"""

from __future__ import annotations

import asyncio
import threading
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
from oomguard.watch.summary import summary_json, summary_text

GiB = 1 << 30


class StairGpu:
    """NVML-shaped samples: a 24 GiB card climbing in steps every ``per_level`` samples (S2)."""

    source = Source.NVML
    name = "nvml"

    def __init__(self, levels_gib=(17.5, 18.6, 20.1, 23.4), per_level=4):
        self.levels = levels_gib
        self.per_level = per_level
        self.n = 0

    @property
    def done(self) -> bool:
        return self.n >= len(self.levels) * self.per_level + 2

    async def sample(self, t):
        i = min(self.n // self.per_level, len(self.levels) - 1)
        self.n += 1
        return [Sample(t, self.source, "gpu0", {"used_bytes": self.levels[i] * GiB, "total_bytes": 24.0 * GiB})]

    async def close(self):
        return None


def config(url, **kw):
    base = dict(url=normalize_base_url(url), interval_s=0.1, duration_s=60.0, hold_s=0.3, local=False, gone_after_s=0.5)
    base.update(kw)
    return WatchConfig(**base)


def run(cfg, extra=(), drift=None, until=None):
    """Run a monitor; stop it once ``until()`` is true (checked every 20 ms)."""

    async def go():
        sources = open_sources(cfg)
        for s in extra:
            sources.samplers.append(s)
            sources.note(s.name, s.source, "fake", True)
        stop = asyncio.Event()

        async def watcher():
            while until is not None and not until():
                await asyncio.sleep(0.02)
            if until is not None:
                stop.set()

        w = asyncio.ensure_future(watcher())
        try:
            return await Monitor(cfg, sources, drift=drift).run(stop)
        finally:
            w.cancel()

    return asyncio.run(go())


def test_duration_bounds_the_watch():
    with FakeVllmServer() as srv:
        started = time.monotonic()
        res = run(config(srv.base_url, duration_s=1.5))
        elapsed = time.monotonic() - started
    assert res.ended_by is EndReason.DURATION
    assert 1.4 <= elapsed < 8.0
    assert res.state.samples_by_source["metrics"] >= 1


def test_samples_and_an_alert_held_for_its_hold_time():
    with FakeVllmServer() as srv:
        srv.kv, srv.running, srv.waiting = 0.93, 8, 3
        res = run(config(srv.base_url), until=lambda: srv.scrapes >= 12)
    assert res.ended_by is EndReason.INTERRUPT
    assert res.state.samples_by_source["metrics"] >= 10
    fired = [e for e in res.events if e.kind is EventKind.ALERT_FIRING]
    assert len(fired) == 1
    assert fired[0].data["rule"] == "kv-cache-high" and fired[0].t - fired[0].data["since"] >= 0.3
    d = summary_json(res)
    assert d["peaks"]["engine"]["kv_cache_usage"]["value"] == pytest.approx(0.93)
    assert d["peaks"]["engine"]["running"]["value"] == 8
    assert d["alerts"][0]["resolved_at"] is None  # still firing at the end
    for key in (
        "base_url",
        "started_at",
        "duration_s",
        "interval_s",
        "ended_by",
        "sources",
        "peaks",
        "patterns",
        "alerts",
        "events",
        "server_gone",
        "plan_comparison",
        "timelines",
    ):
        assert key in d


def test_below_threshold_or_too_short_does_not_fire():
    with FakeVllmServer() as srv:
        srv.kv = 0.5
        res = run(config(srv.base_url), until=lambda: srv.scrapes >= 6)
    assert not res.alerts_fired
    with FakeVllmServer() as srv:
        srv.kv = 0.99
        res = run(config(srv.base_url, hold_s=300), until=lambda: srv.scrapes >= 6)
    assert not res.alerts_fired
    assert summary_json(res)["alerts"][0]["state"] == "pending"


def test_server_going_away_ends_cleanly_with_last_samples():
    srv = FakeVllmServer()
    srv.kv = 0.4
    threading.Thread(target=lambda: srv.wait_scrapes(5) and srv.close(), daemon=True).start()
    started = time.monotonic()
    res = run(config(srv.base_url))
    assert time.monotonic() - started < 20
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
        res = run(config(srv.base_url))
        elapsed = time.monotonic() - started
    assert res.ended_by is EndReason.SERVER_GONE
    assert "did not answer" in res.gone["reason"] or "timed out" in res.gone["reason"]
    assert elapsed < 15


def test_unreachable_at_start():
    res = run(config(f"http://127.0.0.1:{refused_port()}"))
    assert res.ended_by is EndReason.UNREACHABLE
    assert res.state.ticks <= 2  # at the first refused scrape (a tick later when the machine is loaded)
    assert "connection refused" in res.gone["reason"]


def test_gpu_alert_and_s2_step_pattern():
    gpu = StairGpu()
    with FakeVllmServer() as srv:
        res = run(config(srv.base_url, alert_gpu_mem=0.95, hold_s=0.0), extra=[gpu], until=lambda: gpu.done)
    pat = summary_json(res)["patterns"]["gpu0"]
    assert pat["pattern"] == "steps" and len(pat["steps"]) == 3
    assert [round(s["after"], 1) for s in pat["steps"]] == [18.6, 20.1, 23.4]
    fired = [e for e in res.events if e.kind is EventKind.ALERT_FIRING]
    assert fired and fired[0].data["key"] == "gpu0" and fired[0].data["value"] == pytest.approx(23.4 / 24)
    text = summary_text(res)
    assert "gpu0: climbing in 3 steps" in text and "staircase pattern" in text


def test_preemptions_become_one_event_per_burst():
    with FakeVllmServer() as srv:
        srv.preemptions = 10
        srv.on_scrape = lambda n: setattr(srv, "preemptions", 10 + 5 * min(3, max(0, n - 2)))
        res = run(config(srv.base_url), until=lambda: srv.scrapes >= 9)
    pre = [e for e in res.events if e.kind is EventKind.PREEMPTIONS]
    assert sum(e.data["new"] for e in pre) == 15
    assert len(pre) == 2  # the first burst at once, the rest coalesced and flushed at the end
    assert res.state.preemptions_during == 15


def test_drift_against_the_plan():
    with FakeVllmServer() as srv:
        ok = DriftCheck(PlanReference(kv_cache_tokens=131072, budget_bytes_per_gpu=[22 * GiB]))
        res = run(config(srv.base_url, alert_gpu_mem=None), drift=ok, until=lambda: srv.scrapes >= 3)
        assert not [e for e in res.events if e.kind is EventKind.DRIFT]
        assert summary_json(res)["plan_comparison"]["live_kv_cache_tokens"] == 131072

        gpu = StairGpu()
        off = DriftCheck(PlanReference(kv_cache_tokens=327680, budget_bytes_per_gpu=[20 * GiB]))
        res = run(config(srv.base_url, alert_gpu_mem=None), extra=[gpu], drift=off, until=lambda: gpu.done)
    drift = [e for e in res.events if e.kind is EventKind.DRIFT]
    assert any("KV pool drift" in e.message and e.data["predicted_tokens"] == 327680 for e in drift)
    assert any(e.data.get("gpu") == "gpu0" for e in drift)  # 23.4 GiB > 20 GiB budget + margin
    pc = summary_json(res)["plan_comparison"]
    assert pc["pool_difference"] == pytest.approx(131072 / 327680 - 1, abs=1e-3)
    assert "pool" in pc["warnings"] and "budget-gpu0" in pc["warnings"]


def test_stop_event_ends_promptly():
    with FakeVllmServer() as srv:
        started = time.monotonic()
        res = run(config(srv.base_url, duration_s=None, interval_s=1.0), until=lambda: time.monotonic() - started > 0.3)
    assert res.ended_by is EndReason.INTERRUPT
    assert time.monotonic() - started < 4
