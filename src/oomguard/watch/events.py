"""What happened during a watch, in order: alerts, preemptions, kernel kills, drift, the server leaving."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oomguard.textenum import TextEnum


class EventKind(TextEnum):
    ALERT_FIRING = "alert-firing"
    ALERT_RESOLVED = "alert-resolved"
    PREEMPTIONS = "preemptions"
    OOM_KILL = "oom-kill"
    DRIFT = "drift"
    SERVER_GONE = "server-gone"
    SOURCE = "source"  # a sampler stopped or recovered


class Severity(TextEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


@dataclass(frozen=True)
class Event:
    t: float
    kind: EventKind
    severity: Severity
    message: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "t": round(self.t, 3),
            "kind": self.kind.value,
            "severity": self.severity.value,
            "message": self.message,
            **({"data": self.data} if self.data else {}),
        }

    def line(self) -> str:
        return f"[{self.t:8.1f}s] {self.severity.value.upper():8} {self.message}"
