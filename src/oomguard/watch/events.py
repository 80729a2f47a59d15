"""What happened during a watch, in order: alerts, preemptions, kernel kills, drift, the server leaving."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class EventKind(str, Enum):
    ALERT_FIRING = "alert-firing"
    ALERT_RESOLVED = "alert-resolved"
    PREEMPTIONS = "preemptions"
    OOM_KILL = "oom-kill"
    DRIFT = "drift"
    SERVER_GONE = "server-gone"
    SOURCE = "source"  # a sampler stopped or recovered

    def __str__(self) -> str:
        return self.value


class Severity(str, Enum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    def __str__(self) -> str:
        return self.value


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
