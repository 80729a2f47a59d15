"""From matched start-ups to a calibration: each record's offsets, and each group's medians.

A record's offset for a term is logged − predicted, in bytes, per GPU:

- ``weights``, ``non_torch``, ``cuda_graph``: where the start-up logged the term;
- ``activation``: where it logged the activation peak; otherwise, where it logged a
  profiled KV pool, the part of the pool's error that the logged terms do not explain
  (KV = requested − weights − non-torch − activation [− graphs in the budget], so
  predicted pool − logged pool = the offsets of every term charged to it). vLLM's INFO
  lines since 0.10 print the weights and the pool but not the peak: this is how most
  fleets' logs calibrate. The record says ``from the KV pool`` when it was measured so.

A group's offset is the median of its records' (robust to the one start-up that shared
its card), with the smallest and largest offset seen and the median absolute deviation.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from oomguard.calibrate.match import Match, compare
from oomguard.model.calibration import MIN_RECORDS, TERMS, Calibration, Group, GroupKey, TermOffset
from oomguard.units import GiB


@dataclass(frozen=True)
class RecordOffset:
    term: str
    offset_bytes: int
    where: str
    how: str = "logged"  # "logged" | "from the KV pool"


def record_offsets(m: Match) -> list[RecordOffset]:
    """This start-up's offsets (empty when it is not matched)."""
    if not m.matched or m.plan is None:
        return []
    cmp = compare(m)
    lg = m.facts.logged
    out: list[RecordOffset] = []
    d: dict[str, float] = {}
    for t in ("weights", "non_torch", "cuda_graph", "activation"):
        if t in cmp:
            d[t] = cmp[t][1] - cmp[t][0]
            out.append(RecordOffset(t, int(round(d[t] * GiB)), lg[t].where))
    r = m.plan.tight_rank
    s = m.plan.settings
    if "activation" not in d and "kv_pool" in cmp and r.kv_source == "profiled":
        pred_kv, logged_kv = cmp["kv_pool"]
        graphs_in = bool(s.estimate_cudagraphs) and r.cuda_graph.bytes > 0
        explained = d.get("weights", 0.0) + d.get("non_torch", 0.0) + (d.get("cuda_graph", 0.0) if graphs_in else 0.0)
        rest = (pred_kv - logged_kv) - explained
        out.append(RecordOffset("activation", int(round(rest * GiB)), lg["kv_pool"].where, "from the KV pool"))
    return out


def fit_group(key: GroupKey, matches: list[Match]) -> Group:
    """The medians of one group's record offsets."""
    per: dict[str, list[RecordOffset]] = {}
    for m in matches:
        for o in record_offsets(m):
            per.setdefault(o.term, []).append(o)
    offsets = {}
    for term in TERMS:
        recs = per.get(term)
        if not recs:
            continue
        vals = [o.offset_bytes for o in recs]
        med = statistics.median(vals)
        mad = statistics.median(abs(v - med) for v in vals)
        offsets[term] = TermOffset(term, int(round(med)), len(vals), min(vals), max(vals), int(round(mad)),
                                   tuple(o.where + ("" if o.how == "logged" else f" ({o.how})") for o in recs))
    return Group(key, len(matches), offsets)


def fit_calibration(matches: list[Match], *, source: str = "", min_records: int = MIN_RECORDS) -> Calibration:
    """One group per (GPU, release family, model family) among the matched start-ups."""
    groups: dict[GroupKey, list[Match]] = {}
    for m in matches:
        if m.matched and m.key is not None:
            groups.setdefault(m.key, []).append(m)
    return Calibration(tuple(fit_group(k, v) for k, v in sorted(groups.items(), key=lambda kv: kv[0].label())),
                       source=source, min_records=min_records)
