"""Inline SVG charts for the HTML report: a time-series chart and a histogram.

No library and no script: the report must open offline, in any browser, and
from an issue attachment. Lines are drawn as steps (a sample holds until the
next one), which is how ``nvidia-smi`` memory actually moves: in steps as the
KV pool and activations are allocated (S2).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")


@dataclass
class Series:
    name: str
    points: list[tuple[float, float]]
    color: str = ""
    dashed: bool = False


@dataclass
class Band:
    t0: float
    t1: float
    label: str


@dataclass
class Chart:
    title: str
    series: list[Series]
    y_fmt: Callable[[float], str] = lambda v: f"{v:g}"
    y_min: float | None = 0.0
    y_max: float | None = None
    bands: list[Band] = field(default_factory=list)
    hlines: list[tuple[float, str, str]] = field(default_factory=list)  # (y, label, color)
    width: int = 940
    height: int = 240
    step: bool = True


_PAD_L, _PAD_R, _PAD_T, _PAD_B = 70, 210, 28, 30


def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    for mult in (1, 2, 2.5, 5, 10):
        step = mult * mag
        if step >= raw:
            break
    start = (lo // step) * step
    ticks, v = [], start
    while v <= hi + step * 1e-9 and len(ticks) < 20:
        if v >= lo - step * 1e-9:
            ticks.append(round(v, 12))
        v += step
    return ticks


def line_chart(chart: Chart) -> str:
    pts = [p for s in chart.series for p in s.points]
    w, h = chart.width, chart.height
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{w}" height="{h}" '
        f'viewBox="0 0 {w} {h}" role="img" aria-label="{escape(chart.title)}">',
        f'<text x="{_PAD_L}" y="16" class="title">{escape(chart.title)}</text>',
    ]
    if not pts:
        out.append(f'<text x="{w / 2}" y="{h / 2}" text-anchor="middle" class="empty">no samples</text></svg>')
        return "".join(out)
    t_lo = min(min(p[0] for p in pts), min((b.t0 for b in chart.bands), default=0.0))
    t_hi = max(max(p[0] for p in pts), max((b.t1 for b in chart.bands), default=0.0))
    ys = [p[1] for p in pts] + [y for y, _, _ in chart.hlines]
    y_lo = chart.y_min if chart.y_min is not None else min(ys)
    y_hi = chart.y_max if chart.y_max is not None else max(ys) * 1.05
    if y_hi <= y_lo:
        y_hi = y_lo + 1.0
    if t_hi <= t_lo:
        t_hi = t_lo + 1.0
    pw, ph = w - _PAD_L - _PAD_R, h - _PAD_T - _PAD_B

    def x(t: float) -> float:
        return _PAD_L + (t - t_lo) / (t_hi - t_lo) * pw

    def y(v: float) -> float:
        return _PAD_T + ph - (min(max(v, y_lo), y_hi) - y_lo) / (y_hi - y_lo) * ph

    for i, b in enumerate(chart.bands):
        fill = "#f2f2f2" if i % 2 == 0 else "#e6eef7"
        out.append(
            f'<rect x="{x(b.t0):.1f}" y="{_PAD_T}" width="{max(1.0, x(b.t1) - x(b.t0)):.1f}" height="{ph}" '
            f'fill="{fill}"><title>{escape(b.label)}</title></rect>'
            f'<text x="{x(b.t0) + 2:.1f}" y="{_PAD_T + 10}" class="band">{escape(b.label)}</text>'
        )
    for tv in _nice_ticks(y_lo, y_hi):
        out.append(
            f'<line x1="{_PAD_L}" x2="{_PAD_L + pw}" y1="{y(tv):.1f}" y2="{y(tv):.1f}" class="grid"/>'
            f'<text x="{_PAD_L - 6}" y="{y(tv) + 4:.1f}" text-anchor="end" class="tick">{escape(chart.y_fmt(tv))}</text>'
        )
    for tv in _nice_ticks(t_lo, t_hi, 8):
        out.append(
            f'<text x="{x(tv):.1f}" y="{h - 10}" text-anchor="middle" class="tick">{tv:g}s</text>'
        )
    out.append(
        f'<rect x="{_PAD_L}" y="{_PAD_T}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>'
    )
    for yv, label, color in chart.hlines:
        out.append(
            f'<line x1="{_PAD_L}" x2="{_PAD_L + pw}" y1="{y(yv):.1f}" y2="{y(yv):.1f}" stroke="{color}" '
            f'stroke-dasharray="6 4" stroke-width="1.5"/>'
            f'<text x="{_PAD_L + pw + 4}" y="{y(yv) + 4:.1f}" class="tick" fill="{color}">{escape(label)}</text>'
        )
    legend_y = _PAD_T + 12
    for i, s in enumerate(chart.series):
        color = s.color or PALETTE[i % len(PALETTE)]
        ordered = sorted(s.points)
        if not ordered:
            continue
        coords = []
        prev = None
        for t, v in ordered:
            if chart.step and prev is not None:
                coords.append(f"{x(t):.1f},{y(prev):.1f}")
            coords.append(f"{x(t):.1f},{y(v):.1f}")
            prev = v
        dash = ' stroke-dasharray="5 3"' if s.dashed else ""
        out.append(
            f'<polyline class="series" fill="none" stroke="{color}" stroke-width="2"{dash} '
            f'points="{" ".join(coords)}"><title>{escape(s.name)}</title></polyline>'
        )
        if len(ordered) == 1:
            out.append(f'<circle cx="{x(ordered[0][0]):.1f}" cy="{y(ordered[0][1]):.1f}" r="3" fill="{color}"/>')
        peak = max(ordered, key=lambda p: p[1])
        out.append(
            f'<rect x="{_PAD_L + pw + 4}" y="{legend_y + 16 * i + 20 - 8}" width="10" height="10" fill="{color}"/>'
            f'<text x="{_PAD_L + pw + 18}" y="{legend_y + 16 * i + 20 + 1}" class="legend">'
            f"{escape(s.name)} (max {escape(chart.y_fmt(peak[1]))})</text>"
        )
    out.append("</svg>")
    return "".join(out)


def histogram(title: str, values: list[float], *, bins: int = 20, fmt: Callable[[float], str] = lambda v: f"{v:.3g}s", width: int = 940, height: int = 200) -> str:
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
        f'<text x="{_PAD_L}" y="16" class="title">{escape(title)}</text>',
    ]
    if not values:
        out.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" class="empty">no data</text></svg>')
        return "".join(out)
    lo, hi = min(values), max(values)
    if hi <= lo:
        hi = lo + max(abs(lo) * 0.1, 1e-3)
    bins = max(1, min(bins, len(values)))
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - lo) / (hi - lo) * bins))] += 1
    pw, ph = width - _PAD_L - _PAD_R, height - _PAD_T - _PAD_B
    top = max(counts)
    bw = pw / bins
    for i, c in enumerate(counts):
        bh = c / top * ph
        out.append(
            f'<rect class="bar" x="{_PAD_L + i * bw + 1:.1f}" y="{_PAD_T + ph - bh:.1f}" width="{max(1.0, bw - 2):.1f}" '
            f'height="{bh:.1f}" fill="{PALETTE[0]}"><title>{c} request(s) in '
            f"{escape(fmt(lo + i * (hi - lo) / bins))} to {escape(fmt(lo + (i + 1) * (hi - lo) / bins))}</title></rect>"
        )
    out.append(f'<rect x="{_PAD_L}" y="{_PAD_T}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>')
    out.append(f'<text x="{_PAD_L}" y="{height - 10}" class="tick">{escape(fmt(lo))}</text>')
    out.append(f'<text x="{_PAD_L + pw}" y="{height - 10}" text-anchor="end" class="tick">{escape(fmt(hi))}</text>')
    out.append(f'<text x="{_PAD_L - 6}" y="{_PAD_T + 8}" text-anchor="end" class="tick">{top}</text>')
    out.append("</svg>")
    return "".join(out)
