"""How far a plan is checked against vLLM's code: the plan's ``coverage`` object and, for the
generic path, its mark and the range on each estimate.

Pure: reads the description's ``coverage`` / ``assumptions`` / ``coverage_detail`` (attached at load
time from data/coverage.json, inputs/coverage_data.py) and the plan's own numbers.

Ranges of a generic plan. The registry sweep measured the generic path's signed error
e = oomguard / vLLM − 1 per estimate over every swept architecture (docs/models.md, "The generic
path's measured distance"); with the central 90 % of e in [lo, hi], the true value of an estimate
x lies in [x / (1 + hi), x / (1 + lo)]. The KV pool is what the budget leaves once weights are
paid, so its range follows the weights' range; KV tokens and concurrency follow the pool's range
and the measured error of KV tokens for a given pool.
"""

from __future__ import annotations


from oomguard.units import GiB

MARK = "generic: {model_type} is not checked against vLLM's code for this architecture"


def mark(model) -> str | None:
    if getattr(model, "coverage", "native") != "generic":
        return None
    return MARK.format(model_type=model.model_type or "(no model_type)")


def _truth(x: float, err: list | None) -> tuple[float, float]:
    """The range of the true value of an estimate x whose signed error lies in err = [lo, hi]."""
    if not err:
        return x, x
    lo, hi = float(err[0]), float(err[1])
    return x / (1 + hi), x / (1 + lo)


def ranges(plan) -> dict | None:
    """The generic plan's ranges (GiB and counts), or None for a native plan."""
    m = plan.model
    if getattr(m, "coverage", "native") != "generic":
        return None
    r = (getattr(m, "coverage_detail", None) or {}).get("ranges") or {}
    rank = plan.tight_rank
    w = rank.weights.bytes
    w_lo, w_hi = _truth(w, r.get("weights"))
    a = rank.activation.bytes
    a_lo, a_hi = _truth(a, r.get("activation")) if r.get("activation") else (rank.activation.low or a, rank.activation.high or a)
    pool = rank.kv_bytes
    if rank.kv_source == "profiled":
        pool_lo, pool_hi = max(0.0, pool - (w_hi - w) - (a_hi - a)), pool + (w - w_lo) + (a - a_lo)
    else:  # --kv-cache-memory-bytes / a pinned block count: the pool is given
        pool_lo = pool_hi = float(pool)
    kv_err = r.get("kv_tokens") or r.get("concurrency")
    out = {
        "weights_gib": [round(w_lo / GiB, 2), round(w_hi / GiB, 2)],
        "activation_gib": [round(a_lo / GiB, 2), round(a_hi / GiB, 2)],
        "kv_cache_gib": [round(pool_lo / GiB, 2), round(pool_hi / GiB, 2)],
    }
    if pool > 0:
        t_lo, t_hi = _truth(plan.kv_cache_tokens, kv_err)
        c_lo, c_hi = _truth(plan.max_concurrency, kv_err)
        out["kv_cache_tokens"] = [int(t_lo * pool_lo / pool), int(t_hi * pool_hi / pool)]
        out["max_concurrency"] = [round(c_lo * pool_lo / pool, 2), round(c_hi * pool_hi / pool, 2)]
    out["basis"] = r.get("basis", "no measured ranges in data/coverage.json")
    # The central range is not a bound: say how many swept architectures fell outside it, and how far.
    outside = r.get("outside") or {}
    out["outside"] = {k: v for k, v in outside.items() if v.get("count")}
    return out


def widen_terms(plan):
    """A generic plan's weights and activation terms carry the measured ranges (the formulas are
    the generic path's, not an adapter checked on this architecture)."""
    m = plan.model
    if getattr(m, "coverage", "native") != "generic":
        return plan
    r = (getattr(m, "coverage_detail", None) or {}).get("ranges") or {}
    for rank in plan.ranks:
        w_lo, w_hi = _truth(rank.weights.bytes, r.get("weights"))
        rank.weights = rank.weights._replace(exact=False, low=int(min(w_lo, rank.weights.low or w_lo)),
                               high=int(max(w_hi, rank.weights.high or w_hi)),
                               source=rank.weights.source + "; generic path (architectures/generic.py): range measured by the registry sweep")
        if r.get("activation"):
            a_lo, a_hi = _truth(rank.activation.bytes, r["activation"])
            rank.activation = rank.activation._replace(exact=False, low=int(min(a_lo, rank.activation.low or a_lo)),
                                      high=int(max(a_hi, rank.activation.high or a_hi)))
    return plan


def coverage_dict(plan) -> dict:
    """The plan JSON's ``coverage`` object (docs/json.md)."""
    m = plan.model
    detail = getattr(m, "coverage_detail", None) or {}
    generic = getattr(m, "coverage", "native") == "generic"
    out = {
        "level": detail.get("level") or ("generic" if generic else "native"),
        "model_type": getattr(m, "model_type", None),
        "architecture": getattr(m, "architecture", None),
        "checked": detail.get("checked", ""),
    }
    if detail.get("distance") is not None:
        out["distance"] = detail["distance"]
    if generic:
        out["mark"] = mark(m)
        out["assumptions"] = list(getattr(m, "assumptions", ()))
        out["ranges"] = ranges(plan)
    applied = list(getattr(m, "defaults_applied", ()))
    if applied:
        out["defaults_applied"] = applied
    return out


def summary_lines(plan) -> list[str]:
    """Text lines for renderers: the mark, the assumptions and the ranges (generic); one line otherwise."""
    m = plan.model
    detail = getattr(m, "coverage_detail", None) or {}
    if getattr(m, "coverage", "native") != "generic":
        level = detail.get("level", "native")
        return [f"coverage: {level}" + (f" — {detail['checked']}" if detail.get("checked") else "")]
    lines = [mark(m)]
    if detail.get("checked"):
        lines.append(f"  {detail['checked']}")
    lines.append("  assumptions: " + "; ".join(getattr(m, "assumptions", ())))
    rg = ranges(plan) or {}
    if rg:
        bits = [f"weights {rg['weights_gib'][0]:,.2f}–{rg['weights_gib'][1]:,.2f} GiB", f"KV pool {rg['kv_cache_gib'][0]:,.2f}–{rg['kv_cache_gib'][1]:,.2f} GiB"]
        if "kv_cache_tokens" in rg:
            bits.append(f"KV tokens {rg['kv_cache_tokens'][0]:,}–{rg['kv_cache_tokens'][1]:,}")
            bits.append(f"concurrency {rg['max_concurrency'][0]:.2f}–{rg['max_concurrency'][1]:.2f}x")
        lines.append("  ranges: " + ", ".join(bits) + f" ({rg['basis']})")
        if rg.get("outside"):
            far = "; ".join(f"{k} {v['count']} (worst {v['worst'][0] * 100:+.0f} % / {v['worst'][1] * 100:+.0f} %)"
                            for k, v in rg["outside"].items())
            lines.append(f"  outside those ranges in the sweep: {far}")
    return lines
