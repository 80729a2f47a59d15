"""What one ``watch`` run is told: where, how often, how long, which thresholds."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from oomguard.errors import InputError

if TYPE_CHECKING:
    from oomguard.probe.client import ServerURL

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)?")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_duration(text: str, *, option: str = "duration") -> float:
    """Seconds from ``90``, ``1.5``, ``60s``, ``5m``, ``1h30m``, ``250ms``."""
    s = str(text).strip().lower()
    pos, total = 0, 0.0
    for m in _DURATION.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_S[m.group(2)]
        pos = m.end()
    if not s or pos != len(s):
        raise InputError(f"--{option} {text!r} is not a duration (e.g. 30, 90s, 5m, 1h)")
    return total


@dataclass(frozen=True)
class WatchConfig:
    url: ServerURL
    interval_s: float = 1.0
    duration_s: float | None = None  # None: until Ctrl-C or the server goes away
    alert_kv: float | None = 0.9  # KV cache usage fraction
    alert_gpu_mem: float | None = 0.95  # GPU memory used / total
    hold_s: float = 60.0  # a threshold must hold this long before the alert fires
    api_key: str | None = None
    server_pid: int | None = None
    local: bool | None = None  # None: decide from the host name
    gone_after_s: float = 10.0  # /metrics failing this long (remote server) = gone
    history_points: int = 2048  # per series, older points merged (peaks kept)
    spark_points: int = 40

    @property
    def http_timeout_s(self) -> float:
        """Every HTTP call is bounded: a hung server cannot hang the watch."""
        return min(max(2.0 * self.interval_s, 2.0), 10.0)
