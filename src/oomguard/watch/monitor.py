"""The watch loop: sample every source on a fixed-rate timer, until told to stop or the server leaves.

Each tick starts every sampler that is not still busy from an earlier tick
(a hung ``nvidia-smi`` is skipped, never queued), waits at most one interval
for them, folds what arrived into the state, runs the alert state machines
and the plan comparison, and redraws the view. Every HTTP call carries its
own timeout (``WatchConfig.http_timeout_s``), so nothing here can block for
longer than that.

The server is gone when its local process tree has exited, or, for a server
on another host (or one whose process we cannot see), when ``/metrics`` has
failed for ``gone_after_s``. Either way the loop records a ``server-gone``
event with the reason and the last samples of every source, and returns.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from oomguard.textenum import TextEnum
from oomguard.probe.classes import Source
from oomguard.probe.samplers import MemorySampler, Sample
from oomguard.watch.alerts import AlertRule, AlertState, AlertTracker, Signal
from oomguard.watch.config import WatchConfig
from oomguard.watch.drift import DriftCheck
from oomguard.watch.events import Event, EventKind, Severity
from oomguard.watch.sources import Sources
from oomguard.watch.state import WatchState


class EndReason(TextEnum):
    DURATION = "duration"
    INTERRUPT = "interrupt"
    SERVER_GONE = "server-gone"
    UNREACHABLE = "unreachable"


class View(Protocol):
    def start(self, monitor: Monitor) -> None: ...

    def update(self, monitor: Monitor, events: list[Event]) -> None: ...

    def stop(self, monitor: Monitor) -> None: ...


class NullView:
    def start(self, monitor: Monitor) -> None: ...

    def update(self, monitor: Monitor, events: list[Event]) -> None: ...

    def stop(self, monitor: Monitor) -> None: ...


@dataclass
class WatchResult:
    config: WatchConfig
    state: WatchState
    trackers: list[AlertTracker]
    events: list[Event]
    sources: Sources
    started_at: float  # epoch seconds
    duration_s: float
    ended_by: EndReason
    gone: dict[str, Any] | None
    drift: DriftCheck | None

    @property
    def alerts_fired(self) -> bool:
        return any(t.fired() for t in self.trackers)


def _kv_usage(values: dict) -> float | None:
    return values.get("kv_cache_usage")


def _gpu_fraction(values: dict) -> float | None:
    used, total = values.get("used_bytes"), values.get("total_bytes")
    return None if used is None or not total else used / total


def make_trackers(config: WatchConfig) -> list[AlertTracker]:
    out = []
    if config.alert_kv is not None:
        out.append(AlertTracker(AlertRule(Signal.KV_USAGE, config.alert_kv, config.hold_s)))
    if config.alert_gpu_mem is not None:
        out.append(AlertTracker(AlertRule(Signal.GPU_MEMORY, config.alert_gpu_mem, config.hold_s)))
    return out


@dataclass
class Monitor:
    config: WatchConfig
    sources: Sources
    view: View = field(default_factory=NullView)
    drift: DriftCheck | None = None

    def __post_init__(self) -> None:
        self.state = WatchState(self.config.history_points, self.config.spark_points)
        self.trackers = make_trackers(self.config)
        self.events: list[Event] = []
        self._pending: dict[str, tuple[MemorySampler, asyncio.Task]] = {}
        self._zero = time.perf_counter()
        self._started_at = time.time()
        self._metrics_failing_since: float | None = None
        self._metrics_warned = False

    def now(self) -> float:
        return time.perf_counter() - self._zero

    # -- one tick ------------------------------------------------------------

    async def _sample_all(self, t: float) -> list[Sample]:
        out: list[Sample] = []
        # a sampler that outlived its tick's wait: take its reading now that it is in
        for name, (s, task) in list(self._pending.items()):
            if task.done():
                del self._pending[name]
                out += self._collect(s, task)
        started: list[tuple[MemorySampler, asyncio.Task]] = []
        for s in self.sources.samplers:
            if s.name in self._pending:
                self.sources.status[self._status_name(s)].skipped_busy += 1
                continue
            task = asyncio.ensure_future(s.sample(t))
            self._pending[s.name] = (s, task)
            started.append((s, task))
        if started:
            await asyncio.wait([task for _, task in started], timeout=max(self.config.interval_s, 0.05))
        for s, task in started:
            if task.done():
                del self._pending[s.name]
                out += self._collect(s, task)
        return out

    def _status_name(self, sampler: MemorySampler) -> str:
        if sampler.name in self.sources.status:
            return sampler.name
        return {Source.NVML: "nvml", Source.NVIDIA_SMI: "nvidia-smi"}.get(sampler.source, sampler.name)

    def _collect(self, sampler: MemorySampler, task: asyncio.Task) -> list[Sample]:
        st = self.sources.status.get(self._status_name(sampler))
        if task.cancelled():
            return []
        exc = task.exception()
        if exc is not None:
            if st is not None:
                st.errors += 1
                st.last_error = f"{type(exc).__name__}: {exc}"[:200]
            return []
        got = task.result()
        if st is not None:
            st.samples += len(got)
        return got

    def _observe_alerts(self, t: float, samples: list[Sample] = ()) -> list[Event]:
        """Feed the alert machines every reading of this tick, each at its own time: a scrape that outlived its
        tick arrives together with the next one, and the peak it carries must be seen (not only the latest
        value). A key with no new reading is observed at ``t`` with its latest value while it is fresh."""
        events = []
        arrived: dict[str, list[Sample]] = {}
        for s in samples:
            arrived.setdefault(s.key, []).append(s)
        for tracker in self.trackers:
            rule = tracker.rule
            if rule.signal is Signal.KV_USAGE:
                keys = self.state.engine_keys() if len(self.state.engine_keys()) > 1 else ["engine"]  # per DP engine
                sources, reading = (Source.METRICS,), _kv_usage
            else:
                keys = self.state.gpu_keys()
                sources, reading = (Source.NVML, Source.NVIDIA_SMI), _gpu_fraction
            pairs = []
            for k in keys:
                new = sorted((s for s in arrived.get(k, ()) if s.source in sources), key=lambda s: s.t)
                if new:
                    pairs += [(k, s.t, reading(s.values)) for s in new]
                else:
                    lt = self.state.latest.get(k)
                    pairs.append((k, t, reading(lt.values) if lt is not None and self._fresh(k, t) else None))
            for key, at, value in pairs:
                for tr in tracker.observe(key, at, value):
                    what = "KV cache usage" if rule.signal is Signal.KV_USAGE else f"{key} memory"
                    if tr.state is AlertState.FIRING:
                        events.append(
                            Event(
                                t,
                                EventKind.ALERT_FIRING,
                                Severity.CRITICAL if rule.signal is Signal.GPU_MEMORY else Severity.WARNING,
                                f"ALERT {rule.name}: {what} {tr.value:.1%} >= {rule.threshold:.0%} "
                                f"held {tr.t - tr.since:.1f}s (since +{tr.since:.1f}s)",
                                {
                                    "rule": rule.name,
                                    "key": key,
                                    "value": tr.value,
                                    "threshold": rule.threshold,
                                    "since": round(tr.since, 3),
                                },
                            )
                        )
                    else:
                        events.append(
                            Event(
                                t,
                                EventKind.ALERT_RESOLVED,
                                Severity.INFO,
                                f"resolved {rule.name}: {what} back to {tr.value:.1%}",
                                {"rule": rule.name, "key": key, "value": tr.value},
                            )
                        )
        return events

    def _fresh(self, key: str, t: float) -> bool:
        """A reading older than a few intervals is no data (a failing scrape is not a recovery)."""
        lt = self.state.latest.get(key)
        return lt is not None and t - lt.t <= max(
            3 * self.config.interval_s, self.config.http_timeout_s + self.config.interval_s
        )

    def _server_gone(self, t: float) -> dict[str, Any] | None:
        tree = self.sources.tree
        metrics = self.sources.metrics
        if tree is not None:
            rss = self.state.latest.get("server")
            dead = (rss is not None and rss.values.get("alive") == 0.0) or not tree.alive()
            if dead:
                return {"t": round(t, 3), "reason": f"server process {tree.pid} ({tree.name}) exited"}
        if metrics is None:
            return None
        if metrics.consecutive_failures == 0:
            self._metrics_failing_since = None
            return None
        if self._metrics_failing_since is None:
            self._metrics_failing_since = t
        failing_for = t - self._metrics_failing_since
        if tree is not None and tree.alive():
            return None  # still starting up, or busy: the process is there
        if failing_for >= self.config.gone_after_s and metrics.consecutive_failures >= 2:
            return {
                "t": round(t, 3),
                "reason": f"/metrics failing for {failing_for:.0f}s: {metrics.last_error}",
            }
        return None

    def _metrics_warning(self, t: float) -> list[Event]:
        metrics = self.sources.metrics
        if metrics is None or metrics.consecutive_failures < 3 or self._metrics_warned:
            if metrics is not None and metrics.consecutive_failures == 0 and self._metrics_warned:
                self._metrics_warned = False
                return [Event(t, EventKind.SOURCE, Severity.INFO, "/metrics answers again")]
            return []
        self._metrics_warned = True
        return [Event(t, EventKind.SOURCE, Severity.WARNING, f"/metrics failing: {metrics.last_error}")]

    # -- the loop ----------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> WatchResult:
        cfg = self.config
        ended = EndReason.INTERRUPT
        gone: dict[str, Any] | None = None
        self.view.start(self)
        tick = 0
        try:
            while True:
                t = self.now()
                samples = await self._sample_all(t)
                events = self.state.ingest(t, samples)
                events += self._observe_alerts(t, samples)
                if self.drift is not None:
                    events += self.drift.check(t, self.state)
                events += self._metrics_warning(t)
                gone = self._server_gone(t)
                # Never reached, not "gone": the first scrape failed, or (on a loaded machine, where the first
                # scrape can still be pending at tick 0) no scrape has answered and the connection is refused.
                # A server that accepts and never answers is hung: gone, after gone_after_s.
                m = self.sources.metrics
                first_contact_failed = (
                    self.sources.tree is None
                    and m is not None
                    and m.consecutive_failures
                    and (tick == 0 or (not getattr(m, "successes", 1) and getattr(m, "unreachable", False)))
                )
                if first_contact_failed:
                    gone = {
                        "t": round(t, 3),
                        "reason": f"cannot reach {cfg.url.root}/metrics: {self.sources.metrics.last_error}",
                    }
                    ended = EndReason.UNREACHABLE
                elif gone is not None:
                    ended = EndReason.SERVER_GONE
                if gone is not None:
                    gone["last_samples"] = self.state.last_samples()
                    what = "server unreachable" if ended is EndReason.UNREACHABLE else "server gone"
                    events.append(
                        Event(
                            t,
                            EventKind.SERVER_GONE,
                            Severity.CRITICAL,
                            f"{what}: {gone['reason']}",
                            {"reason": gone["reason"]},
                        )
                    )
                self.events += events
                self.view.update(self, events)
                if gone is not None:
                    break
                if stop.is_set():
                    ended = EndReason.INTERRUPT
                    break
                if cfg.duration_s is not None and self.now() >= cfg.duration_s:
                    ended = EndReason.DURATION
                    break
                tick += 1
                next_at = tick * cfg.interval_s
                if self.now() > next_at:  # fell behind: skip ticks instead of bursting
                    tick = int(self.now() / cfg.interval_s) + 1
                    next_at = tick * cfg.interval_s
                if cfg.duration_s is not None:
                    next_at = min(next_at, cfg.duration_s)
                try:
                    await asyncio.wait_for(stop.wait(), timeout=max(0.0, next_at - self.now()))
                except asyncio.TimeoutError:
                    pass
                if stop.is_set():
                    ended = EndReason.INTERRUPT
                    break
        finally:
            tail = self.state.finish(self.now())
            self.events += tail
            await self._close()
            self.view.stop(self)
        return WatchResult(
            config=cfg,
            state=self.state,
            trackers=self.trackers,
            events=self.events,
            sources=self.sources,
            started_at=self._started_at,
            duration_s=self.now(),
            ended_by=ended,
            gone=gone,
            drift=self.drift,
        )

    async def _close(self) -> None:
        for _, task in self._pending.values():
            if not task.done():
                task.cancel()
        for s in self.sources.samplers:
            try:
                await asyncio.wait_for(s.close(), timeout=5)
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
