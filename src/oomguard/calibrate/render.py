"""Terminal view of a calibration: predicted vs logged per group, the offsets, the start-ups not matched."""

from __future__ import annotations

from oomguard.calibrate.match import GIB_TERMS, TERMS
from oomguard.calibrate.run import CalibrateResult, term_stats
from oomguard.units import GiB


def _err(s: dict | None, term: str) -> str:
    if not s:
        return "-"
    unit = " GiB" if term in GIB_TERMS else ""
    med = f"{s['median_abs_error']:,.2f}{unit}" if term != "tokens" else f"{s['median_abs_error']:,.0f}"
    worst = f"{s['worst_abs_error']:,.2f}" if term != "tokens" else f"{s['worst_abs_error']:,.0f}"
    pct = f" ({s['median_abs_pct']:.1f} %)" if "median_abs_pct" in s else ""
    return f"{s['n']}: {med}{pct} / {worst}"


def render(res: CalibrateResult, console) -> None:
    from rich.table import Table

    found, matched = len(res.matches), len(res.matched)
    console.print(f"[bold]{found}[/] start-up(s) found in {len(res.inputs)} input(s); [bold]{matched}[/] matched to the planner")
    for r in res.inputs:
        for n in r.notes:
            console.print(f"[yellow]note:[/] {r.file}: {n}", markup=True)
    cal = {g.key: g for g in res.calibration.groups}
    for key, ms in res.groups().items():
        t = Table(title=f"{key.label()}: {len(ms)} start-up(s)", show_edge=False, pad_edge=False, title_justify="left")
        t.add_column("term")
        t.add_column("predicted vs logged: n: median |error| / worst", justify="right")
        t.add_column("offset (logged − predicted)", justify="right")
        g = cal.get(key)
        for term in TERMS:
            s = term_stats(ms, term)
            off = g.offsets.get(term) if g else None
            if s is None and off is None:
                continue
            if off is not None:
                ok = off.n >= res.calibration.min_records
                o = (f"{off.offset_bytes / GiB:+.2f} GiB from {off.n} (spread {off.low_bytes / GiB:+.2f}..{off.high_bytes / GiB:+.2f})"
                     + ("" if ok else f", [yellow]refused: < {res.calibration.min_records} start-ups[/]"))
            else:
                o = "" if term not in ("weights", "activation", "non_torch", "cuda_graph") else "-"
            t.add_row(term, _err(s, term), o)
        console.print(t)
    bad = [m for m in res.matches if not m.matched]
    if bad:
        console.print(f"[bold]not matched ({len(bad)}):[/]")
        for m in bad:
            console.print(f"  {m.facts.where}: {m.reason}", markup=False, highlight=False)
    console.print(f"[dim]offsets are applied per group only from {res.calibration.min_records} start-ups on (calibrate --write FILE, "
                  "then plan/check/fit --calibration FILE)[/]")
    if res.written:
        console.print(f"wrote {res.written}: {len(res.calibration.groups)} group(s)")
    for n in res.notes:
        console.print(f"[yellow]note:[/] {n}")
