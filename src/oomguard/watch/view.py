"""How a running watch looks: a refreshing rich table on a terminal, plain lines elsewhere.

``LiveView`` redraws once per tick (never on its own timer: the watch's CPU
budget is small) a table of GPU memory per GPU, KV cache usage per engine,
requests running / waiting, preemptions and the server's RSS, each with its
peak, a sparkline of recent samples, and the alert state. Events scroll
above the table. ``LineView`` prints each event at once and a status line
every ``status_every_s``. ``EventsOnlyView`` (``--format json``) prints only
events, to stderr, leaving stdout to the JSON summary.
"""

from __future__ import annotations

import sys
from typing import IO, Any

from oomguard.units import GiB
from oomguard.watch.alerts import AlertState, Signal
from oomguard.watch.events import Event, Severity

_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float], lo: float | None = None, hi: float | None = None, width: int = 30) -> str:
    vals = values[-width:]
    if not vals:
        return ""
    lo = min(vals) if lo is None else lo
    hi = max(vals) if hi is None else hi
    span = hi - lo
    if span <= 0:
        return _BARS[0] * len(vals)
    out = []
    for v in vals:
        x = (min(max(v, lo), hi) - lo) / span
        out.append(_BARS[min(len(_BARS) - 1, int(x * (len(_BARS) - 1) + 0.5))])
    return "".join(out)


def _alert_state(monitor: Any, signal: Signal, key: str) -> str:
    for tr in monitor.trackers:
        if tr.rule.signal is signal:
            ks = tr.keys.get(key)
            if ks is None or ks.state is AlertState.OK:
                return "ok" if ks is None or not ks.times_fired else f"ok (fired {ks.times_fired}x)"
            if ks.state is AlertState.PENDING:
                return f"pending {monitor.now() - (ks.since or 0):.0f}/{tr.rule.hold_s:g}s"
            return "FIRING"
    return "-"


def rows(monitor: Any) -> list[tuple[str, str, str, str, str]]:
    """(signal, now, peak, sparkline, alert) for every row of the live table."""
    st = monitor.state
    out = []
    for key in st.gpu_keys():
        tl = st.timelines.get(f"{key}.used_bytes")
        total = st.value(key, "total_bytes")
        used = st.value(key, "used_bytes")
        frac = f" {used / total:.0%}" if used is not None and total else ""
        now = f"{(used or 0) / GiB:.1f}/{(total or 0) / GiB:.1f} GiB{frac}"
        peak = f"{tl.peak.value / GiB:.1f} GiB" if tl and tl.peak else "-"
        spark = sparkline(tl.recent(), 0.0, total) if tl else ""
        out.append((f"{key} memory", now, peak, spark, _alert_state(monitor, Signal.GPU_MEMORY, key)))
    engines = st.engine_keys() if len(st.engine_keys()) > 1 else ["engine"]
    for key in engines:
        tl = st.timelines.get(f"{key}.kv_cache_usage")
        v = st.value(key, "kv_cache_usage")
        label = "KV cache" if key == "engine" else f"KV cache {key}"
        out.append(
            (
                label,
                "-" if v is None else f"{v:.1%}",
                f"{tl.peak.value:.1%}" if tl and tl.peak else "-",
                sparkline(tl.recent(), 0.0, 1.0) if tl else "",
                _alert_state(monitor, Signal.KV_USAGE, key),
            )
        )
    run, wait = st.value("engine", "running"), st.value("engine", "waiting")
    if run is not None or wait is not None:
        tl_r, tl_w = st.timelines.get("engine.running"), st.timelines.get("engine.waiting")
        peak = f"{tl_r.peak.value:.0f} / {tl_w.peak.value:.0f}" if tl_r and tl_w and tl_r.peak and tl_w.peak else "-"
        out.append(
            (
                "running / waiting",
                f"{run or 0:.0f} / {wait or 0:.0f}",
                peak,
                sparkline(tl_w.recent()) if tl_w else "",
                "",
            )
        )
        out.append(("preemptions", f"+{st.preemptions_during} (total {int(st.preemptions_last or 0)})", "", "", ""))
    rss = st.timelines.get("server.rss_bytes")
    if rss is not None and rss.latest is not None:
        procs = st.value("server", "num_processes")
        out.append(
            (
                "server RSS",
                f"{rss.latest / GiB:.2f} GiB" + (f" ({procs:.0f} proc)" if procs else ""),
                f"{rss.peak.value / GiB:.2f} GiB" if rss.peak else "-",
                sparkline(rss.recent()),
                "",
            )
        )
        avail = st.value("server", "host_available_bytes")
        if avail is not None:
            tl = st.timelines.get("server.host_available_bytes")
            low = f"low {tl.low.value / GiB:.1f} GiB" if tl and tl.low else ""
            out.append(("host RAM available", f"{avail / GiB:.1f} GiB", low, "", ""))
    return out


def status_line(monitor: Any) -> str:
    parts = []
    for signal, now, _peak, _spark, alert in rows(monitor):
        if signal in ("host RAM available",) or now == "-":
            continue
        flag = f" [{alert}]" if alert and alert not in ("ok", "-") else ""
        parts.append(f"{signal} {now}{flag}")
    return f"[{monitor.now():8.1f}s] " + (" | ".join(parts) if parts else "no data yet")


class LineView:
    def __init__(self, out: IO[str] | None = None, status_every_s: float = 10.0):
        self.out = out or sys.stdout
        self.status_every_s = status_every_s
        self._last_status: float | None = None

    def start(self, monitor: Any) -> None:
        cfg = monitor.config
        print(
            f"oomguard watch {cfg.url.root}: every {cfg.interval_s:g}s"
            + (f" for {cfg.duration_s:g}s" if cfg.duration_s else " until Ctrl-C")
            + "; sources: "
            + ", ".join(s.name for s in monitor.sources.status.values() if s.active),
            file=self.out,
            flush=True,
        )

    def update(self, monitor: Any, events: list[Event]) -> None:
        for e in events:
            print(e.line(), file=self.out, flush=True)
        now = monitor.now()
        if self._last_status is None or now - self._last_status >= self.status_every_s:
            self._last_status = now
            print(status_line(monitor), file=self.out, flush=True)

    def stop(self, monitor: Any) -> None:
        return None


class EventsOnlyView(LineView):
    """``--format json``: events to stderr as they happen, nothing else."""

    def __init__(self) -> None:
        super().__init__(sys.stderr, status_every_s=float("inf"))

    def start(self, monitor: Any) -> None:
        return None

    def update(self, monitor: Any, events: list[Event]) -> None:
        for e in events:
            print(e.line(), file=self.out, flush=True)


class LiveView:
    """A rich ``Live`` table, redrawn once per tick."""

    def __init__(self, console: Any = None):
        from rich.console import Console

        self.console = console or Console()
        self._live: Any = None

    def _render(self, monitor: Any) -> Any:
        from rich.table import Table

        cfg = monitor.config
        t = Table(
            title=f"oomguard watch {cfg.url.root}  +{monitor.now():.0f}s  (every {cfg.interval_s:g}s)",
            caption="sources: "
            + ", ".join(s.name for s in monitor.sources.status.values() if s.active)
            + "   Ctrl-C ends with a summary",
            expand=False,
        )
        for col, justify in (
            ("signal", "left"),
            ("now", "right"),
            ("peak", "right"),
            ("recent", "left"),
            ("alert", "left"),
        ):
            t.add_column(col, justify=justify, no_wrap=True)
        for signal, now, peak, spark, alert in rows(monitor):
            style = "bold red" if alert == "FIRING" else ("yellow" if alert.startswith("pending") else None)
            t.add_row(signal, now, peak, spark, alert, style=style)
        return t

    def start(self, monitor: Any) -> None:
        from rich.live import Live

        self._live = Live(self._render(monitor), console=self.console, auto_refresh=False, transient=False)
        self._live.start()

    def update(self, monitor: Any, events: list[Event]) -> None:
        for e in events:
            style = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow"}.get(e.severity, "")
            self._live.console.print(e.line(), style=style, markup=False, highlight=False)
        self._live.update(self._render(monitor), refresh=True)

    def stop(self, monitor: Any) -> None:
        if self._live is not None:
            self._live.update(self._render(monitor), refresh=True)
            self._live.stop()
