"""The alert state machine: a threshold must hold for the hold time, like Prometheus' ``for:``."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from oomguard.probe.classes import Source
from oomguard.probe.samplers import Sample
from oomguard.watch.alerts import AlertRule, AlertState, AlertTracker, Signal
from oomguard.watch.events import EventKind


def rule(threshold=0.9, hold=60.0):
    return AlertRule(Signal.KV_USAGE, threshold, hold)


def test_fires_only_after_the_hold_time_and_resolves():
    tr = AlertTracker(rule(hold=60))
    assert tr.observe("engine", 0, 0.95) == []
    assert tr.keys["engine"].state is AlertState.PENDING
    assert tr.observe("engine", 59, 0.97) == []
    (fired,) = tr.observe("engine", 60, 0.96)
    assert fired.state is AlertState.FIRING and fired.since == 0 and fired.key == "engine"
    assert tr.observe("engine", 61, 0.99) == []  # firing once, not every tick
    (resolved,) = tr.observe("engine", 70, 0.5)
    assert resolved.state is AlertState.OK
    assert tr.keys["engine"].history == [{"fired_at": 60, "since": 0, "resolved_at": 70, "peak": 0.99}]


def test_a_dip_restarts_the_hold():
    tr = AlertTracker(rule(hold=10))
    tr.observe("engine", 0, 0.95)
    tr.observe("engine", 9, 0.5)  # below: back to ok, silently
    assert tr.observe("engine", 12, 0.95) == []
    assert tr.observe("engine", 21, 0.95) == []
    assert tr.observe("engine", 22, 0.95)[0].since == 12


def test_missing_data_clears_pending_but_not_firing():
    tr = AlertTracker(rule(hold=5))
    tr.observe("gpu0", 0, 0.95)
    tr.observe("gpu0", 1, None)
    assert tr.keys["gpu0"].state is AlertState.OK
    tr.observe("gpu0", 2, 0.95)
    tr.observe("gpu0", 7, 0.95)
    assert tr.keys["gpu0"].state is AlertState.FIRING
    assert tr.observe("gpu0", 8, None) == []
    assert tr.keys["gpu0"].state is AlertState.FIRING


def test_zero_hold_fires_on_first_sample_and_keys_are_independent():
    tr = AlertTracker(AlertRule(Signal.GPU_MEMORY, 0.95, 0.0))
    assert tr.observe("gpu0", 0, 0.96)[0].state is AlertState.FIRING
    assert tr.observe("gpu1", 0, 0.5) == []
    assert tr.fired()
    assert [k for k, _ in tr.active()] == ["gpu0"]


def _reference(samples, threshold, hold):
    """Brute force: at each sample, has the value been >= threshold at every sample since some t0 with t - t0 >= hold?"""
    fired, firing, since = [], False, None
    for t, v in samples:
        if v is None:
            if not firing:
                since = None
            continue
        if v >= threshold:
            since = t if since is None else since
            if not firing and t - since >= hold:
                firing = True
                fired.append(t)
        else:
            firing, since = False, None
    return fired


@given(
    st.lists(st.one_of(st.none(), st.floats(min_value=0, max_value=1)), min_size=1, max_size=80),
    st.floats(min_value=0.05, max_value=0.95),
    st.sampled_from([0.0, 1.0, 2.5, 5.0]),
)
def test_matches_a_brute_force_reference(values, threshold, hold):
    samples = [(i * 0.5, v) for i, v in enumerate(values)]
    tr = AlertTracker(rule(threshold, hold))
    fired = [tx.t for t, v in samples for tx in tr.observe("engine", t, v) if tx.state is AlertState.FIRING]
    assert fired == _reference(samples, threshold, hold)


# -- a scrape that outlives its tick (the integration test's flake: a KV peak above the alert, no alert) ------


class _LateScrape:
    """Engine samples from /metrics; the second scrape (the peak) answers only after its tick's wait, when the
    test releases it: it then arrives in the same tick as the next, lower, reading. No sleeping: the late
    answer is held by an asyncio.Event, so the timing is the same on any machine."""

    source = Source.METRICS
    name = "metrics"

    def __init__(self, peak: float, usual: float) -> None:
        self.release = asyncio.Event()
        self.calls = 0
        self.peak, self.usual = peak, usual

    async def sample(self, t: float) -> list[Sample]:
        self.calls += 1
        if self.calls == 2:
            await self.release.wait()
            return [Sample(t, Source.METRICS, "engine", {"kv_cache_usage": self.peak})]
        return [Sample(t, Source.METRICS, "engine", {"kv_cache_usage": self.usual})]

    async def close(self) -> None:
        return None


def test_a_peak_from_a_late_scrape_fires_the_alert():
    from oomguard.probe.client import normalize_base_url
    from oomguard.watch.config import WatchConfig
    from oomguard.watch.monitor import Monitor
    from oomguard.watch.sources import Sources

    async def go():
        late = _LateScrape(peak=0.5, usual=0.01)
        cfg = WatchConfig(url=normalize_base_url("http://127.0.0.1:9"), interval_s=0.05, duration_s=60.0, hold_s=0.0,
                          local=False, alert_kv=0.3)
        m = Monitor(cfg, Sources(samplers=[late]))
        fired = []
        for tick, t in enumerate((0.0, 0.25, 0.5)):
            if tick == 2:
                late.release.set()  # the peak's scrape answers now, after its own tick gave up waiting
                await asyncio.sleep(0)  # let it finish (a yield to the loop, not a wait)
            samples = await m._sample_all(t)
            m.state.ingest(t, samples)
            fired += [e for e in m._observe_alerts(t, samples) if e.kind is EventKind.ALERT_FIRING]
            if tick == 1:
                assert samples == [] and "metrics" in m._pending  # the peak's scrape is still out
        return m, fired

    m, fired = asyncio.run(go())
    assert [e.data["value"] for e in fired] == [0.5]
    assert fired[0].data["since"] == 0.25  # at the peak's own time, not the tick that collected it
    assert m.state.value("engine", "kv_cache_usage") == 0.01  # the latest reading is the later, lower one
