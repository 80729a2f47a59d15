"""One self-contained HTML file: verdict, chain, stages, memory timelines, TTFT.

Built from the redacted result dict only. No external asset, font or script:
the file opens offline and can be attached to an issue as is. Timelines share
one time axis (seconds since the probe started) with the stages shaded, so the
step pattern of GPU memory can be read against the load that caused it.
"""

from __future__ import annotations

from html import escape
from typing import Any

from oomguard.probe.svg import Band, Chart, Series, histogram, line_chart

GiB = float(1 << 30)

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1000px;color:#222}
h1{font-size:22px;margin:0 0 8px}h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid #ddd}
.pass{color:#1a7f37}.fail{color:#c62828}.warn{color:#9a6700}
table{border-collapse:collapse;width:100%;margin:6px 0}td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}
.chart{display:block;margin:8px 0;background:#fff}.chart .title{font-weight:600;font-size:13px}
.chart .tick{font-size:11px;fill:#555}.chart .legend{font-size:11px}.chart .band{font-size:10px;fill:#777}
.chart .grid{stroke:#eee}.chart .empty{fill:#999}code{background:#f6f8fa;padding:0 3px}
.evidence{font-family:ui-monospace,Menlo,monospace;font-size:12px;white-space:pre-wrap;color:#444}
"""


def _gib(v: float) -> str:
    return f"{v / GiB:.2f} GiB"


def _pct(v: float) -> str:
    return f"{v * 100:.0f}%"


def _bands(result: dict[str, Any]) -> list[Band]:
    return [Band(s["t_start"], s["t_end"], s["name"]) for s in result["stages"] if s["t_end"] > s["t_start"]]


def _points(rows: list[dict[str, Any]], key: str, *, scale: float = 1.0, where: str | None = None) -> list[tuple[float, float]]:
    return [(r["t"], r[key] / scale) for r in rows if key in r and (where is None or r.get("key") == where)]


def charts(result: dict[str, Any]) -> list[str]:
    samples = result["samples"]
    bands = _bands(result)
    out = []
    for src in ("nvml", "nvidia-smi"):
        rows = samples.get(src) or []
        keys = sorted({r["key"] for r in rows})
        if not keys:
            continue
        series = [Series(f"{k} used", _points(rows, "used_bytes", where=k)) for k in keys]
        if src == "nvml":
            series += [
                Series(f"{k} server procs", _points(rows, "server_bytes", where=k), dashed=True)
                for k in keys
                if any("server_bytes" in r for r in rows if r["key"] == k)
            ]
        hlines = []
        totals = {r["key"]: r["total_bytes"] for r in rows if "total_bytes" in r}
        if totals:
            hlines.append((max(totals.values()), f"total {_gib(max(totals.values()))}", "#555"))
        limits = result["limits"]["gpu_limit_bytes"]
        if limits:
            lim = min(limits.values())
            hlines.append((lim, f"limit {_gib(lim)}", "#c62828"))
        out.append(
            line_chart(Chart(f"GPU memory per GPU ({src})", series, y_fmt=_gib, bands=bands, hlines=hlines))
        )
    metrics = samples.get("metrics") or []
    if metrics:
        out.append(
            line_chart(
                Chart(
                    "KV-cache usage (vllm:kv_cache_usage_perc)",
                    [Series("KV usage", _points(metrics, "kv_cache_usage"))],
                    y_fmt=_pct,
                    y_max=1.0,
                    bands=bands,
                    hlines=[(0.9, "90% alert", "#9a6700")],
                )
            )
        )
    flight = [Series("client in flight", _in_flight(result["requests"]) or _points(samples.get("client") or [], "in_flight"))]
    if metrics:
        flight += [
            Series("server running", _points(metrics, "running")),
            Series("server waiting", _points(metrics, "waiting"), dashed=True),
        ]
        pre = _points(metrics, "preemptions_total")
        if pre and pre[-1][1] > pre[0][1]:
            flight.append(Series("preemptions (cumulative)", [(t, v - pre[0][1]) for t, v in pre]))
    out.append(line_chart(Chart("Requests in flight", flight, bands=bands, y_fmt=lambda v: f"{v:.0f}")))
    rss = samples.get("rss") or []
    if rss:
        out.append(
            line_chart(
                Chart(
                    "Server process tree RSS and host RAM available",
                    [
                        Series("server RSS", _points(rss, "rss_bytes")),
                        Series("host available", _points(rss, "host_available_bytes"), dashed=True),
                    ],
                    y_fmt=_gib,
                    bands=bands,
                )
            )
        )
    ttfts = [r["ttft_s"] for r in result["requests"] if r.get("ttft_s") is not None]
    out.append(histogram("TTFT distribution (all stages)", ttfts))
    return out


def _in_flight(requests: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """Exact requests-in-flight steps from each request's start and end (no sampling gap)."""
    events = sorted([(r["t_start"], 1) for r in requests] + [(r["t_end"], -1) for r in requests if r["t_end"]])
    points, n = [], 0
    for t, d in events:
        n += d
        points.append((t, float(n)))
    return points


def _table(headers: list[str], rows: list[list[Any]], num_cols: set[int] = frozenset()) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            cls = ' class="num"' if i in num_cols else ""
            cells.append(f"<td{cls}>{cell}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _f(v: Any, fmt: str = "{:.3f}") -> str:
    return "-" if v is None else escape(fmt.format(v))


def render_html(result: dict[str, Any]) -> str:
    ok = result["verdict"] == "pass"
    srv = result["server"]
    parts = [
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<title>oomguard probe: {escape(result['verdict'])}</title><style>{_CSS}</style></head><body>",
        f'<h1 class="{"pass" if ok else "fail"}">oomguard probe: '
        f"{'PASS' if ok else 'FAIL [' + escape(str(result['class'])) + ']'}</h1>",
        f"<p>{escape(result['summary'])}</p>",
        f"<p>server <code>{escape(srv['base_url'])}</code>, model <code>{escape(str(srv['model']))}</code>, "
        f"max_model_len {escape(str(srv['probed_max_model_len']))}"
        + (f", KV pool {srv['kv_cache_tokens']:,} tokens" if srv.get("kv_cache_tokens") else "")
        + f", alive after: {escape(str(srv['alive_after']))} ({escape(srv['alive_detail'] or '-')})</p>",
    ]
    if result["findings"]:
        parts.append("<h2>Findings</h2><ol>")
        for f in result["findings"]:
            ev = "".join(f'<div class="evidence">{escape(e)}</div>' for e in f["evidence"])
            fix = f"<div>fix: {escape(f['fix'])}</div>" if f["fix"] else ""
            parts.append(f"<li><b>{escape(f['class'])}</b>: {escape(f['summary'])}{ev}{fix}</li>")
        parts.append("</ol>")
    log = result.get("server_log")
    if log:
        parts.append(f"<h2>Server log</h2><p>{escape(str(log.get('file')))}: {escape(str(log.get('summary')))}</p>")
        rows = [[escape(str(v.get("class"))), escape(str(v.get("summary"))),
                 escape("; ".join(str(e.get("text")) for e in (v.get("evidence") or [])[:3] if isinstance(e, dict)))]
                for v in (log.get("verdicts") or [])]
        if rows:
            parts.append(_table(["class", "summary", "evidence"], rows))
    parts.append("<h2>Memory and load over time</h2>")
    parts.extend(charts(result))
    if result.get("plan_comparison"):
        pc = result["plan_comparison"]
        parts.append(f"<h2>Plan comparison</h2><p>{escape(pc.get('summary', ''))}</p>")
        rows = [[escape(k), escape(str(v))] for k, v in pc.items() if k != "summary"]
        parts.append(_table(["quantity", "value"], rows))
    parts.append("<h2>Client chain</h2>")
    rows = []
    for c in result["chain"]:
        mark = "ok" if c["ok"] else ("warn" if c["severity"] == "warn" else "FAIL")
        css = "pass" if c["ok"] else ("warn" if c["severity"] == "warn" else "fail")
        rows.append([escape(c["check"]), f'<span class="{css}">{mark}</span>', escape(c["detail"]), escape(c["fix"] or "")])
    parts.append(_table(["check", "result", "detail", "fix"], rows))
    if result["stages"]:
        parts.append("<h2>Stages</h2>")
        rows = [
            [
                escape(s["name"]),
                f"{s['prompt_tokens']:,}",
                str(s["max_tokens"]),
                str(s["concurrency"]),
                str(s["requests_ok"]),
                str(s["requests_failed"] + s["requests_not_started"]),
                _f(s["ttft_p50_s"]),
                _f(s["ttft_p99_s"]),
                _f(s["itl_p50_s"]),
                _f(s["requests_per_s"], "{:.2f}"),
            ]
            for s in result["stages"]
        ]
        parts.append(
            _table(
                ["stage", "prompt tokens", "max tokens", "concurrency", "ok", "failed", "TTFT p50 s", "TTFT p99 s", "ITL p50 s", "req/s"],
                rows,
                num_cols=set(range(1, 10)),
            )
        )
    parts.append("<h2>Samplers</h2>")
    rows = [
        [escape(name), "yes" if st["active"] else "no", str(st["samples"]), str(st["errors"]), escape(st["note"] or st.get("last_error") or "")]
        for name, st in result["samplers"].items()
    ]
    parts.append(_table(["sampler", "active", "samples", "errors", "note"], rows))
    kernel = (result["peak"].get("kernel") or {}).get("lines") or []
    if kernel:
        parts.append("<h2>Kernel OOM-killer lines</h2>")
        parts.extend(f'<div class="evidence">{escape(line)}</div>' for line in kernel)
    if result["notes"]:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{escape(n)}</li>" for n in result["notes"]) + "</ul>")
    parts.append(
        f"<p><small>prompts: {escape(result.get('prompts') or '-')}; run took {result['duration_s']:.1f}s; "
        "generated by oomguard probe</small></p></body></html>"
    )
    return "".join(parts)
