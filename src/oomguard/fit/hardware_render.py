"""Terminal view of the hardware search: the three answers with their commands, then every launch that fits."""

from __future__ import annotations

from oomguard.fit.hardware import HardwareOption, HardwareResult


def _money(x: float | None) -> str:
    return "unpriced" if x is None else f"${x:,.2f}/h"


def _tpd(o: HardwareOption) -> str:
    t = o.tokens_per_dollar
    if t is None:
        return "-"
    if t == float("inf"):
        return "owned (no cost)"
    return f"{t / 1e6:,.2f}M tokens/$"


def _answer(title: str, o: HardwareOption | None, console) -> None:
    if o is None:
        return
    console.print(f"[bold]{title}[/]: {o.label()}, {_money(o.cost_per_hour)}; decode ≈ {o.tokens_per_s:,.0f} tokens/s at the goal's "
                  f"concurrency ({_tpd(o)}); TTFT ≈ {o.ttft_s:,.2f} s, ITL ≈ {o.itl_s * 1000:,.0f} ms; {o.headroom_gib:.2f} GiB "
                  "headroom per GPU", highlight=False)
    p = o.candidate.plan
    console.print(f"    {o.candidate.command}", markup=False, highlight=False)
    console.print(f"    plan: {p.kv_cache_tokens:,} KV tokens, {o.capacity} request(s) of the input length; "
                  f"{'starts' if p.starts else 'fails'}" + (f"; {o.interconnect_note}" if o.interconnect_note else ""),
                  markup=False, highlight=False)
    if o.price is not None:
        console.print(f"    price: ${o.price.usd_per_gpu_hour:g}/GPU-h, {o.price.tier or 'tier not stated'}, {o.price.date or 'undated'}, "
                      f"{o.price.source or 'no source given'}", markup=False, highlight=False)


def render_hardware(res: HardwareResult, console, *, top: int = 10) -> None:
    from rich.table import Table

    g = res.goal
    conc = g.get("concurrency") or 1
    console.print(f"[bold]Hardware for {g['model']}[/]: max-model-len {g['max_model_len']:,}, {conc} concurrent request(s) "
                  f"of {g.get('avg_input_len') or g['max_model_len']:,} tokens; prices: {res.prices}", highlight=False)
    fits = len(res.options)
    cards = len({s["gpu"] for s in res.searched})
    console.print(f"searched {cards} card type(s) × 1-8 per node: {fits} launch(es) fit (speeds: estimate, roofline, ±50%)")
    if not res.options:
        console.print("[red bold]nothing fits[/]: no card of the table holds the weights and the goal's KV; lower --context or "
                      "--concurrency, pick a quantized checkpoint, or allow --max-nodes")
    _answer("cheapest that fits", res.cheapest, console)
    _answer("most tokens per dollar", res.best_tokens_per_dollar, console)
    _answer("lowest latency", res.best_latency, console)
    if res.options:
        t = Table(title="every launch that fits (by cost)", show_edge=False, pad_edge=False, title_justify="left")
        for col in ("hardware", "$/h", "decode tok/s", "tokens/$", "TTFT s", "ITL ms", "headroom GiB"):
            t.add_column(col, justify="left" if col == "hardware" else "right")
        for o in res.options[:top]:
            t.add_row(o.label(), _money(o.cost_per_hour), f"{o.tokens_per_s:,.0f}", _tpd(o), f"{o.ttft_s:,.2f}", f"{o.itl_s * 1000:,.0f}",
                      f"{o.headroom_gib:.2f}")
        console.print(t)
        if len(res.options) > top:
            console.print(f"[dim]{len(res.options) - top} more (--top N, or --format json)[/]")
    for n in res.notes:
        console.print(f"[yellow]note:[/] {n}")
