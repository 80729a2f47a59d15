"""Alerts with a hold time: a threshold must be exceeded continuously before it fires.

The same semantics as a Prometheus rule's ``for:``. Per rule and per key
(``gpu0``, ``engine``) the state moves::

    ok --(value >= threshold)--> pending --(held for hold_s)--> firing
    pending --(below, or no data)--> ok            (silently: it never fired)
    firing --(below)--> ok                          (a "resolved" event)

A firing alert stays firing while data is missing (a failed scrape is not a
recovery). ``hold_s = 0`` fires on the first sample at or above the threshold.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from oomguard.textenum import TextEnum


class AlertState(TextEnum):
    OK = "ok"
    PENDING = "pending"
    FIRING = "firing"


class Signal(TextEnum):
    KV_USAGE = "kv-usage"  # vLLM's KV cache usage, 0..1
    GPU_MEMORY = "gpu-memory"  # used / total per GPU, 0..1


@dataclass(frozen=True)
class AlertRule:
    signal: Signal
    threshold: float
    hold_s: float

    @property
    def name(self) -> str:
        return {Signal.KV_USAGE: "kv-cache-high", Signal.GPU_MEMORY: "gpu-memory-high"}[self.signal]

    def describe(self) -> str:
        what = {Signal.KV_USAGE: "KV cache usage", Signal.GPU_MEMORY: "GPU memory"}[self.signal]
        return f"{what} >= {self.threshold:.0%} for {self.hold_s:g}s"


@dataclass(frozen=True)
class AlertTransition:
    t: float
    rule: AlertRule
    key: str
    state: AlertState  # FIRING or OK (resolved)
    value: float
    since: float  # when the threshold was first crossed


@dataclass
class KeyState:
    state: AlertState = AlertState.OK
    since: float | None = None
    fired_at: float | None = None
    peak: float = 0.0
    times_fired: int = 0
    history: list[dict] = field(default_factory=list)  # fired/resolved spans, for the summary


class AlertTracker:
    """The state machine of one rule over all its keys."""

    def __init__(self, rule: AlertRule):
        self.rule = rule
        self.keys: dict[str, KeyState] = {}

    def observe(self, key: str, t: float, value: float | None) -> list[AlertTransition]:
        ks = self.keys.setdefault(key, KeyState())
        rule = self.rule
        if value is None:
            if ks.state is AlertState.PENDING:
                ks.state, ks.since = AlertState.OK, None
            return []
        if value >= rule.threshold:
            if ks.state is AlertState.OK:
                ks.state, ks.since, ks.peak = AlertState.PENDING, t, value
            ks.peak = max(ks.peak, value)
            assert ks.since is not None
            if ks.state is AlertState.PENDING and t - ks.since >= rule.hold_s:
                ks.state, ks.fired_at = AlertState.FIRING, t
                ks.times_fired += 1
                ks.history.append({"fired_at": t, "since": ks.since, "resolved_at": None, "peak": value})
                return [AlertTransition(t, rule, key, AlertState.FIRING, value, ks.since)]
            if ks.state is AlertState.FIRING and ks.history:
                ks.history[-1]["peak"] = max(ks.history[-1]["peak"], value)
            return []
        if ks.state is AlertState.FIRING:
            since = ks.since if ks.since is not None else t
            ks.state, ks.since, ks.fired_at = AlertState.OK, None, None
            if ks.history:
                ks.history[-1]["resolved_at"] = t
            return [AlertTransition(t, rule, key, AlertState.OK, value, since)]
        ks.state, ks.since = AlertState.OK, None
        return []

    def active(self) -> list[tuple[str, KeyState]]:
        return [(k, s) for k, s in self.keys.items() if s.state is not AlertState.OK]

    def fired(self) -> bool:
        return any(s.times_fired for s in self.keys.values())
