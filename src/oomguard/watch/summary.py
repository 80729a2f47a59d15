"""The end of a watch: peaks, the step pattern of memory, alerts, events, drift, and why it ended.

``summary_json`` is the ``--format json`` contract (documented in docs/watch.md):
``base_url``, ``started_at``, ``duration_s``, ``interval_s``, ``ended_by``,
``ticks``, ``sources``, ``peaks``, ``patterns``, ``alerts``, ``events``,
``server_gone``, ``plan_comparison``, ``timelines``. ``summary_text`` is the
same for people.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from oomguard.units import GiB
from oomguard.watch.monitor import WatchResult
from oomguard.watch.steps import Pattern, StepPattern, detect_steps

MiB = 1 << 20


def _gpu_tolerance(total: float | None) -> float:
    return max(64 * MiB, 0.005 * total) if total else 64 * MiB


def patterns(result: WatchResult) -> dict[str, StepPattern]:
    """The shape of each memory series: GPU memory per GPU, server RSS, KV usage."""
    st = result.state
    out: dict[str, StepPattern] = {}
    for key in st.gpu_keys():
        tl = st.timelines.get(f"{key}.used_bytes")
        if tl is not None:
            out[key] = detect_steps(tl.points, tolerance=_gpu_tolerance(st.value(key, "total_bytes")))
    rss = st.timelines.get("server.rss_bytes")
    if rss is not None and rss.first is not None:
        out["server_rss"] = detect_steps(rss.points, tolerance=max(64 * MiB, 0.02 * rss.first[1]))
    kv = st.timelines.get("engine.kv_cache_usage")
    if kv is not None:
        out["kv_cache_usage"] = detect_steps(kv.points, tolerance=0.02)
    return out


def _peak(tl: Any) -> dict[str, Any] | None:
    if tl is None or tl.peak is None:
        return None
    return {"value": tl.peak.value, "t": round(tl.peak.t, 3), "last": tl.latest}


def peaks(result: WatchResult) -> dict[str, Any]:
    st = result.state
    out: dict[str, Any] = {}
    for key in st.gpu_keys():
        p = _peak(st.timelines.get(f"{key}.used_bytes"))
        if p:
            total = st.value(key, "total_bytes")
            out[key] = {
                "used_bytes": int(p["value"]),
                "t": p["t"],
                "total_bytes": int(total) if total else None,
                "fraction": round(p["value"] / total, 4) if total else None,
            }
    engine: dict[str, Any] = {}
    for name in ("kv_cache_usage", "running", "waiting"):
        p = _peak(st.timelines.get(f"engine.{name}"))
        if p:
            engine[name] = {"value": p["value"], "t": p["t"]}
    if engine:
        engine["preemptions_during_watch"] = st.preemptions_during
        out["engine"] = engine
    rss = _peak(st.timelines.get("server.rss_bytes"))
    if rss:
        out["server_rss_bytes"] = {"value": int(rss["value"]), "t": rss["t"]}
    avail = st.timelines.get("server.host_available_bytes")
    if avail is not None and avail.low is not None:
        out["host_available_bytes_min"] = {"value": int(avail.low.value), "t": round(avail.low.t, 3)}
    return out


def _alerts(result: WatchResult) -> list[dict[str, Any]]:
    out = []
    for tracker in result.trackers:
        for key, ks in tracker.keys.items():
            for span in ks.history:
                out.append(
                    {
                        "rule": tracker.rule.name,
                        "rule_text": tracker.rule.describe(),
                        "key": key,
                        "since": round(span["since"], 3),
                        "fired_at": round(span["fired_at"], 3),
                        "resolved_at": None if span["resolved_at"] is None else round(span["resolved_at"], 3),
                        "peak": round(span["peak"], 4),
                    }
                )
            if ks.state.value == "pending":
                out.append(
                    {
                        "rule": tracker.rule.name,
                        "rule_text": tracker.rule.describe(),
                        "key": key,
                        "since": round(ks.since or 0.0, 3),
                        "fired_at": None,
                        "resolved_at": None,
                        "peak": round(ks.peak, 4),
                        "state": "pending",
                    }
                )
    return out


def _scale(key: str) -> float:
    return GiB if key.startswith("gpu") or key == "server_rss" else 1.0


def summary_json(result: WatchResult, *, timeline_points: int = 512) -> dict[str, Any]:
    st = result.state
    tls: dict[str, list[list[float]]] = {}
    for name, tl in sorted(st.timelines.items()):
        pts = tl.points
        step = max(1, len(pts) // timeline_points + (1 if len(pts) % timeline_points else 0))
        tls[name] = [[round(t, 3), v] for t, v in pts[::step]]
    return {
        "base_url": result.config.url.root,
        "started_at": _dt.datetime.fromtimestamp(result.started_at, _dt.timezone.utc).isoformat(timespec="seconds"),
        "duration_s": round(result.duration_s, 3),
        "interval_s": result.config.interval_s,
        "ended_by": result.ended_by.value,
        "ticks": st.ticks,
        "samples": dict(st.samples_by_source),
        "sources": [s.to_json() for s in result.sources.status.values()],
        "thresholds": {
            "kv_usage": result.config.alert_kv,
            "gpu_memory": result.config.alert_gpu_mem,
            "hold_s": result.config.hold_s,
        },
        "peaks": peaks(result),
        "patterns": {
            k: {**p.to_json(_scale(k)), "unit": "GiB" if _scale(k) == GiB else "fraction"}
            for k, p in patterns(result).items()
        },
        "alerts": _alerts(result),
        "events": [e.to_json() for e in result.events],
        "oom_kills": list(st.oom_lines),
        "server_gone": result.gone,
        "plan_comparison": result.drift.to_json(st) if result.drift else None,
        "timelines": tls,
    }


def _ts(x: float) -> str:
    """+seconds, with a decimal while it matters."""
    return f"+{x:.1f}s" if abs(x) < 100 else f"+{x:.0f}s"


def _gib(x: float | None) -> str:
    return "?" if x is None else f"{x / GiB:.1f} GiB"


def describe_pattern(name: str, p: StepPattern) -> str:
    scale = _scale(name)
    unit = " GiB" if scale == GiB else ""

    def fmt(x: float | None) -> str:
        if x is None:
            return "?"
        return f"{x / scale:.1f}{unit}" if scale == GiB else f"{x:.0%}"

    if p.pattern is Pattern.STEPS or p.pattern is Pattern.SINGLE_STEP:
        jumps = ", ".join(f"{fmt(s.before)} -> {fmt(s.after)} at {_ts(s.t)}" for s in p.steps)
        n = len(p.steps)
        head = f"climbing in {n} step{'s' if n != 1 else ''}"
        hint = (
            " (the staircase pattern: each new largest prefill grows the allocator's pool, and it stays)"
            if name.startswith("gpu") and n >= 2
            else ""
        )
        return f"{head}: {jumps}{hint}"
    if p.pattern is Pattern.FLAT:
        return f"flat at {fmt(p.end)}"
    if p.pattern is Pattern.RAMP:
        return f"climbing steadily {fmt(p.start)} -> {fmt(p.end)}"
    if p.pattern is Pattern.FALLING:
        return f"falling {fmt(p.start)} -> {fmt(p.end)}"
    if p.pattern is Pattern.TOO_SHORT:
        return "too few samples to tell"
    return f"varying between {fmt(p.low)} and {fmt(p.high)}"


def summary_text(result: WatchResult) -> str:
    st = result.state
    d = summary_json(result, timeline_points=1)
    lines = [
        f"oomguard watch {result.config.url.root}: {result.duration_s:.1f}s, {st.ticks} ticks of {result.config.interval_s:g}s, "
        f"ended by {result.ended_by.value}",
    ]
    srcs = []
    for s in result.sources.status.values():
        srcs.append(
            f"{s.name} {'ok' if s.active else 'off'}" + (f" ({s.samples} samples)" if s.active else f" ({s.note})")
        )
    lines.append("sources: " + "; ".join(srcs))
    pk = d["peaks"]
    lines.append("peaks:")
    for key in st.gpu_keys():
        if key in pk:
            g = pk[key]
            frac = f" ({g['fraction']:.0%})" if g.get("fraction") is not None else ""
            lines.append(f"  {key}: {_gib(g['used_bytes'])} of {_gib(g.get('total_bytes'))}{frac} at {_ts(g['t'])}")
    eng = pk.get("engine")
    if eng:
        kv = eng.get("kv_cache_usage")
        parts = []
        if kv:
            parts.append(f"KV cache {kv['value']:.1%} at {_ts(kv['t'])}")
        if "running" in eng:
            parts.append(f"running {eng['running']['value']:.0f}")
        if "waiting" in eng:
            parts.append(f"waiting {eng['waiting']['value']:.0f}")
        parts.append(f"preemptions during watch {eng.get('preemptions_during_watch', 0)}")
        lines.append("  engine: " + ", ".join(parts))
    if "server_rss_bytes" in pk:
        lines.append(f"  server RSS: {_gib(pk['server_rss_bytes']['value'])} at {_ts(pk['server_rss_bytes']['t'])}")
    if "host_available_bytes_min" in pk:
        lines.append(f"  host RAM available, lowest: {_gib(pk['host_available_bytes_min']['value'])}")
    pats = patterns(result)
    if pats:
        lines.append("memory pattern:")
        for name, p in pats.items():
            lines.append(f"  {name}: {describe_pattern(name, p)}")
    alerts = d["alerts"]
    lines.append("alerts: none fired" if not alerts else "alerts:")
    for a in alerts:
        if a.get("state") == "pending":
            lines.append(f"  {a['rule_text']} ({a['key']}): pending since {_ts(a['since'])}, did not hold long enough")
            continue
        res = f", resolved at {_ts(a['resolved_at'])}" if a["resolved_at"] is not None else ", still firing"
        lines.append(f"  {a['rule_text']} ({a['key']}): fired at {_ts(a['fired_at'])}, peak {a['peak']:.1%}{res}")
    notable = [e for e in result.events if e.kind.value not in ("alert-firing", "alert-resolved")]
    if notable:
        lines.append("events:")
        lines += ["  " + e.line() for e in notable[-20:]]
    pc = d["plan_comparison"]
    if pc:
        live = pc["live_kv_cache_tokens"]
        pool = f"server {live:,} tokens" if live else "server pool unknown (no vllm:cache_config_info)"
        lines.append(
            f"plan: KV pool predicted {pc['predicted_kv_cache_tokens']:,} tokens, {pool}"
            + (f" ({pc['pool_difference']:+.0%})" if pc["pool_difference"] is not None else "")
        )
        if pc["peak_kv_tokens"] is not None:
            lines.append(f"  peak KV use about {pc['peak_kv_tokens']:,} tokens ({pc['peak_kv_usage']:.1%} of the pool)")
        for n in pc["notes"]:
            lines.append(f"  note: {n}")
    if result.gone:
        lines.append(
            f"server {'unreachable' if result.ended_by.value == 'unreachable' else 'gone'} at {_ts(result.gone['t'])}: {result.gone['reason']}"
        )
        last = result.gone.get("last_samples") or {}
        for key, vals in last.items():
            shown = ", ".join(f"{k}={_fmt_val(k, v)}" for k, v in vals.items() if k not in ("t", "source"))
            lines.append(f"  last {key} ({vals.get('source')}, {_ts(vals.get('t', 0))}): {shown}")
    return "\n".join(lines) + "\n"


def _fmt_val(name: str, v: Any) -> str:
    if isinstance(v, float) and name.endswith("_bytes"):
        return _gib(v)
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)
