"""``calibrate`` end to end: read the inputs, cut start-ups, match each to the planner, fit the groups."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from oomguard.calibrate import sources
from oomguard.calibrate.match import GIB_TERMS, TERMS, Match, Options, compare, error, predict, resolve
from oomguard.calibrate.offsets import fit_calibration, record_offsets
from oomguard.calibrate.startups import Segmenter, facts_of
from oomguard.model.calibration import Calibration, GroupKey
from oomguard.units import GiB


@dataclass
class CalibrateResult:
    inputs: list  # sources.ReadReport
    matches: list[Match]
    calibration: Calibration
    written: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def matched(self) -> list[Match]:
        return [m for m in self.matches if m.matched]

    def groups(self) -> dict[GroupKey, list[Match]]:
        out: dict[GroupKey, list[Match]] = {}
        for m in self.matched:
            out.setdefault(m.key, []).append(m)
        return dict(sorted(out.items(), key=lambda kv: kv[0].label()))

    def to_dict(self) -> dict:
        cal = {g.key: g for g in self.calibration.groups}
        groups = []
        for key, ms in self.groups().items():
            g = cal.get(key)
            groups.append({
                "gpu": key.gpu, "release": key.release, "model_family": key.model_family, "startups": len(ms),
                "terms": {t: s for t in TERMS for s in [term_stats(ms, t)] if s},
                "offsets": {t: {"offset_gib": round(o.offset_bytes / GiB, 4), "n": o.n,
                                "spread_gib": [round(o.low_bytes / GiB, 4), round(o.high_bytes / GiB, 4)],
                                "applied": o.n >= self.calibration.min_records}
                            for t, o in (g.offsets.items() if g else ())},
            })
        return {
            "inputs": [r.to_dict() for r in self.inputs],
            "startups": [startup_dict(m) for m in self.matches],
            "found": len(self.matches),
            "matched": len(self.matched),
            "min_records": self.calibration.min_records,
            "groups": groups,
            "written": self.written,
            "notes": list(self.notes),
        }


def startup_dict(m: Match) -> dict:
    f = m.facts
    d = {
        "where": f.where,
        "status": m.status,
        "reason": m.reason or None,
        "release": m.release,
        "version_printed": f.version,
        "engine": f.engine,
        "model": m.model_name or f.model,
        "model_config": getattr(m.model, "source", None),
        "gpu": getattr(m.gpu, "name", None),
        "gpu_source": m.gpu_source or None,
        "group": m.key.label() if m.key else None,
        "outcome": f.outcome,
        "logged": {t: v.to_dict() for t, v in f.logged.items()},
        "launch": {k: v for k, v in m.flags.items() if not _secret(k, v)},
        "notes": list(m.notes),
    }
    if m.matched:
        d["terms"] = {t: error(t, *pl) for t, pl in compare(m).items()}
        d["offsets"] = [{"term": o.term, "offset_gib": round(o.offset_bytes / GiB, 4), "line": o.where, "how": o.how}
                        for o in record_offsets(m)]
    return d


def _secret(k: str, v) -> bool:
    from oomguard.redact import is_secret

    return is_secret(k, v)


def term_stats(ms: list[Match], term: str) -> dict | None:
    """n, median and worst |error| of one term over a group's start-ups (GiB terms also in %)."""
    rows = [(m, compare(m)[term]) for m in ms if term in compare(m)]
    if not rows:
        return None
    errs = [abs(p - lg) for _m, (p, lg) in rows]
    worst_i = max(range(len(rows)), key=lambda i: errs[i])
    d = {"n": len(rows), "median_abs_error": round(statistics.median(errs), 4), "worst_abs_error": round(errs[worst_i], 4),
         "worst": rows[worst_i][0].facts.where, "unit": "GiB" if term in GIB_TERMS else ("tokens" if term == "tokens" else "x")}
    pcts = [abs(p - lg) / abs(lg) * 100 for _m, (p, lg) in rows if lg]
    if pcts:
        d["median_abs_pct"] = round(statistics.median(pcts), 2)
        d["worst_abs_pct"] = round(max(pcts), 2)
    return d


def calibrate(inputs: list[str], opts: Options, *, message_field: str | None = None, write: str | None = None) -> CalibrateResult:
    paths = sources.expand(inputs)
    seg = Segmenter()
    reports = []
    for p in paths:
        report, lines = sources.read(p, message_field=message_field)
        for line in lines:
            seg.feed(line)
        reports.append(report)
    models: dict = {}
    matches = []
    for su in seg.startups:
        facts = facts_of(su)
        if not facts.logged and not facts.version and not facts.model:
            continue  # a stray line that only looked like a start (a second "non-default args" echo)
        m = resolve(facts, opts, models)
        predict(m)
        matches.append(m)
    cal = fit_calibration(matches, source=write or "")
    res = CalibrateResult(reports, matches, cal)
    if write:
        from oomguard.calibrate.profile import dump
        from oomguard.inputs.writes import write_text

        write_text(write, dump(cal, inputs=[sources.logs.display_name(p) for p in paths]), what="the calibration profile")
        res.written = write
    return res
