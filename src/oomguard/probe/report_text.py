"""Terminal summary of a probe, rendered with rich from the (already redacted) result.

Rendering from the result dict rather than from live objects means the text,
JSON and HTML outputs cannot disagree, and none of them can see the key.
"""

from __future__ import annotations

import io
from typing import Any

GiB = float(1 << 30)


def _gib(v: Any) -> str:
    return "-" if v is None else f"{v / GiB:.2f} GiB"


def _s(v: Any) -> str:
    return "-" if v is None else f"{v:.3f}s"


def render_text(result: dict[str, Any], *, color: bool = False, width: int = 110) -> str:
    from rich.console import Console
    from rich.table import Table
    from rich.markup import escape
    from rich.text import Text

    buf = io.StringIO()
    con = Console(file=buf, force_terminal=color, no_color=not color, width=width, highlight=False)
    ok = result["verdict"] == "pass"
    head = Text("PASS" if ok else f"FAIL [{result['class']}]", style="bold green" if ok else "bold red")
    head.append(f"  {result['summary']}", style="")
    con.print(head)
    srv = result["server"]
    con.print(
        escape(f"server {srv['base_url']}  model {srv['model'] or '-'}  max_model_len {srv['probed_max_model_len'] or '-'}"
        + (f"  KV pool {srv['kv_cache_tokens']:,} tokens" if srv.get("kv_cache_tokens") else ""))
    )

    table = Table(title="client chain", title_justify="left", show_edge=False, expand=False)
    for col in ("check", "ok", "detail", "fix"):
        table.add_column(col, overflow="fold")
    for c in result["chain"]:
        mark = "ok" if c["ok"] else ("warn" if c["severity"] == "warn" else "FAIL")
        table.add_row(Text(c["check"]), Text(mark), Text(c["detail"]), Text(c["fix"] or ""))
    con.print(table)

    if result["stages"]:
        st = Table(title="stages", title_justify="left", show_edge=False)
        for col in ("stage", "prompt", "out", "conc", "ok", "failed", "TTFT p50", "TTFT p99", "ITL p50", "req/s"):
            st.add_column(col, justify="right" if col != "stage" else "left")
        for s in result["stages"]:
            st.add_row(
                Text(s["name"]),
                f"{s['prompt_tokens']:,}",
                str(s["max_tokens"]),
                str(s["concurrency"]),
                str(s["requests_ok"]),
                str(s["requests_failed"] + s["requests_not_started"]),
                _s(s["ttft_p50_s"]),
                _s(s["ttft_p99_s"]),
                _s(s["itl_p50_s"]),
                f"{s['requests_per_s']:.2f}",
            )
        con.print(st)

    pk = result["peak"]
    lines = []
    for src in ("nvml", "nvidia-smi"):
        for key, p in (pk.get(src) or {}).items():
            limit = result["limits"]["gpu_limit_bytes"].get(key)
            lines.append(f"{src} {key}: peak {_gib(p['used_bytes'])} of {_gib(p['total_bytes'])} (limit {_gib(limit)})")
    m = pk.get("metrics")
    if m:
        part = [f"KV usage peak {m.get('kv_cache_usage', 0):.0%}"]
        if "running" in m:
            part.append(f"running peak {m['running']:.0f}")
        if "waiting" in m:
            part.append(f"waiting peak {m['waiting']:.0f}")
        if "preemptions_delta" in m:
            part.append(f"preemptions +{m['preemptions_delta']:.0f}")
        if "prefix_cache_hit_rate" in m:
            part.append(f"prefix-cache hit rate {m['prefix_cache_hit_rate']:.0%}")
        lines.append("metrics: " + ", ".join(part))
    r = pk.get("rss")
    if r:
        lines.append(
            f"server RSS peak {_gib(r['rss_bytes'])}; host available min {_gib(r['host_available_bytes_min'])} "
            f"of {_gib(r['host_total_bytes'])}"
        )
    k = pk.get("kernel") or {}
    if k.get("oom_lines"):
        lines.append(f"kernel: {k['oom_lines']} OOM-killer line(s)")
    for name, st in result["samplers"].items():
        if not st["active"]:
            lines.append(f"[dim]{escape(name)}: not sampled ({escape(st['note'])})[/dim]")
    if lines:
        con.print("[bold]memory[/bold]")
        for line in lines:
            con.print("  " + line)

    pc = result.get("plan_comparison")
    if pc:
        con.print(f"[bold]plan[/bold]  {escape(pc.get('summary', ''))}")
    for f in result["findings"]:
        con.print(f"[red]-[/red] {escape('[' + f['class'] + ']')} {escape(f['summary'])}")
        for e in f["evidence"][:3]:
            con.print(f"    {e}", markup=False)
        if f["fix"]:
            con.print(f"    fix: {f['fix']}", markup=False)
    log = result.get("server_log")
    if log:
        con.print(f"[bold]server log[/bold] {escape(str(log.get('file')))}: {escape(str(log.get('summary')))}")
        for v in (log.get("verdicts") or [])[1:3]:
            con.print(f"    also: {v.get('class')}: {v.get('summary')}", markup=False)
    for n in result["notes"]:
        con.print(f"note: {n}", markup=False)
    if result.get("prompts"):
        con.print(
            f"[dim]prompts: {escape(result['prompts'])}; client: {escape(str(result.get('http_transport')))}; "
            f"{result['duration_s']:.1f}s[/dim]"
        )
    return buf.getvalue()
