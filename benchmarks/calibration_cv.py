"""Cross-validated calibration: does ``oomguard calibrate`` make the plan more right on start-ups it did not see?

The corpus is the project's public start-up records (tests/data/calibration/startup.jsonl with their
``raw_excerpt`` and configs). Every record becomes a log file and goes through calibrate's own
pipeline (sources -> start-up segmenter -> diagnose's parsers -> match -> plan):

- a verbatim excerpt is kept as it is, after the two identity lines vLLM prints first
  (``vLLM API server version V`` and ``non-default args: {...}``), rebuilt from the record's
  stated inputs (the same ones benchmarks/calibration.py plans with), because the excerpts were cut
  to the memory lines;
- a record whose source quoted the values in a table or prose is written in vLLM's own line
  formats of its release (``render_log``): the numbers are the ones vLLM printed, the layout is not.

The GPU of each record is passed as ``--gpu`` / ``--gpu-memory-gib`` would be (its logs rarely name it).

Then, per group (GPU x release family x model family, the groups ``calibrate --write`` writes), leave
one out: fit the group's offsets on the other start-ups (only groups with at least MIN_RECORDS + 1
start-ups, so that every fit rests on MIN_RECORDS), plan the held-out start-up with them, and
compare both plans with what it logged. Printed: per group and term, the median |error| before and
after, and the pooled figures. Nothing is a pass/fail target; tests/unit/calibrate checks it runs.

    python benchmarks/calibration_cv.py [--json] [--records]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import calibration as corpus  # noqa: E402  (benchmarks/calibration.py: the record -> planner inputs rules)

from oomguard.calibrate import sources  # noqa: E402
from oomguard.calibrate.match import Options, compare, predict, resolve  # noqa: E402
from oomguard.calibrate.offsets import fit_group  # noqa: E402
from oomguard.calibrate.startups import Segmenter, facts_of  # noqa: E402
from oomguard.model.calibration import MIN_RECORDS, Calibration  # noqa: E402

TERMS = ("weights", "activation", "non_torch", "cuda_graph", "kv_pool", "tokens", "concurrency")
CONFIG_DIRS = tuple(str(d) for d in corpus.CONFIG_DIRS)


# ---------------------------------------------------------------- record -> log text


def _dict_repr(model: str, flags: dict) -> str:
    args = {"model": model, **{k: v for k, v in flags.items()}}
    return repr(args)


def header(r: dict, inp: dict) -> list[str]:
    model = r["config"].replace("__", "/", 1)
    v = inp["version"]
    lines = [f"INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version {v}",
             f"INFO 01-01 00:00:00 [utils.py:1] non-default args: {_dict_repr(model, inp['flags'])}"]
    if inp["env"].get("VLLM_USE_V1") == "0" or str(r.get("engine", "")).startswith("V0"):
        lines.append("INFO 01-01 00:00:00 [llm_engine.py:1] Initializing a V0 LLM engine")
    return lines


def render_log(r: dict, inp: dict) -> list[str]:
    """The record's numbers in vLLM's own formats of its release (for sources that quoted them in tables)."""
    v0 = inp["env"].get("VLLM_USE_V1") == "0" or str(r.get("engine", "")).startswith("V0") or inp["version"] < "0.8"
    out = []
    p = "INFO 01-01 00:00:00 [gpu_worker.py:1] "
    w = r.get("weights_gib") or r.get("weights_gb_as_logged")
    if w:
        out.append(p + (f"Loading model weights took {w} GB" if v0 else f"Model loading took {w} GiB and 1.0 seconds"))
    a, nt, g = r.get("activation_peak_gib"), r.get("non_torch_gib"), r.get("cuda_graph_gib")
    if (r.get("extra") or {}).get("activation_note"):
        a = None  # a V0 peak that includes the weights: not an activation figure
    if v0 and w and a is not None and nt is not None and r.get("kv_cache_gib") is not None:
        out.append(p + f"model weights take {w}GiB; non_torch_memory takes {nt}GiB; PyTorch activation peak memory takes {a}GiB; "
                       f"the rest of the memory reserved for KV Cache is {r['kv_cache_gib']}GiB.")
    elif not v0 and (a is not None or nt is not None):
        parts = ["Memory profiling takes 1.0 seconds. Total non KV cache memory: 0.0GiB"]
        if a is not None:
            parts.append(f"torch peak memory increase: {a}GiB")
        if nt is not None:
            parts.append(f"non-torch forward increase memory: {nt}GiB")
        out.append("DEBUG 01-01 00:00:00 [gpu_worker.py:1] " + "; ".join(parts) + ".")
    if r.get("kv_cache_gib") is not None and not v0:
        out.append(p + f"Available KV cache memory: {r['kv_cache_gib']} GiB")
    if r.get("num_gpu_blocks") and v0:
        out.append(p + f"# GPU blocks: {r['num_gpu_blocks']}, # CPU blocks: 0")
    if r.get("kv_cache_tokens"):
        out.append(p + f"GPU KV cache size: {int(r['kv_cache_tokens']):,} tokens")
    if r.get("max_concurrency") and r.get("concurrency_for_len"):
        out.append(p + f"Maximum concurrency for {int(r['concurrency_for_len']):,} tokens per request: {r['max_concurrency']}x")
    if g is not None and float(g) > 0 and not v0:
        out.append(p + f"Graph capturing finished in 5 secs, took {g} GiB")
    return out


def log_text(r: dict, inp: dict) -> tuple[str, str]:
    verbatim = str(r.get("evidence_form", "")).startswith("verbatim") and r.get("raw_excerpt")
    # the excerpt's own identity lines are often cut mid-way ("'model': 'Qwe"): the rebuilt header replaces them
    own = ("vLLM API server version", "non-default args", "args: Namespace(", "with config:")
    body = [ln for ln in str(r["raw_excerpt"]).splitlines() if not any(k in ln for k in own)] if verbatim else render_log(r, inp)
    head = header(r, inp)
    prefixed = [ln for ln in body if sources._prefix_stream(ln)[0]]
    if prefixed:  # a compose / kubectl stream: the rebuilt lines come from the same replica
        prefix = prefixed[0][: len(prefixed[0]) - len(sources._prefix_stream(prefixed[0])[1])]
        head = [prefix + ln for ln in head]
    return "\n".join(head + body) + "\n", "verbatim excerpt" if verbatim else "rendered from the quoted values"


# ---------------------------------------------------------------- the pipeline on every record


def matches(records: list[dict], workdir: Path) -> tuple[list, list]:
    models: dict = {}
    out, skipped = [], []
    cfg_models: dict = {}
    for r in records:
        inp, why = corpus.prepare(r, cfg_models)
        if inp is None:
            skipped.append((r["id"], why))
            continue
        text, how = log_text(r, inp)
        path = workdir / f"{r['id']}.log"
        path.write_text(text)
        seg = Segmenter()
        _rep, lines = sources.read(str(path))
        for line in lines:
            seg.feed(line)
        if len(seg.startups) != 1:
            skipped.append((r["id"], f"the segmenter found {len(seg.startups)} start-ups in one record's log"))
            continue
        facts = facts_of(seg.startups[0])
        gpu = inp["gpu"]
        opts = Options(gpu=gpu.name if gpu.name != "custom" else None, gpu_total_gib=gpu.total_bytes / 2**30,
                       model_dirs=CONFIG_DIRS)
        m = resolve(facts, opts, models)
        if m.gpu is None and gpu.name == "custom":
            m.gpu, m.gpu_source, m.reason = gpu, "the record's total", ""
        if m.model is not None and m.gpu is not None and not m.reason:
            m.flags.update(inp["flags"])  # the typed flags (the log's dict repr is read back the same, this keeps it exact)
            m.env.update(inp["env"])
        predict(m)
        if not m.matched:
            skipped.append((r["id"], m.reason))
            continue
        m.record_id, m.how = r["id"], how  # type: ignore[attr-defined]
        out.append(m)
    return out, skipped


def abs_err(term: str, pred: float, logged: float) -> tuple[float, float | None]:
    return abs(pred - logged), (abs(pred - logged) / abs(logged) * 100 if logged else None)


def cross_validate(ms: list) -> dict:
    groups: dict = {}
    for m in ms:
        groups.setdefault(m.key, []).append(m)
    res = {"min_records": MIN_RECORDS, "groups": [], "too_small": []}
    pooled: dict = {t: {"before": [], "after": [], "before_pct": [], "after_pct": []} for t in TERMS}
    for key, members in sorted(groups.items(), key=lambda kv: kv[0].label()):
        if len(members) < MIN_RECORDS + 1:
            res["too_small"].append({"group": key.label(), "startups": len(members), "records": [m.record_id for m in members]})
            continue
        per: dict = {t: {"before": [], "after": [], "before_pct": [], "after_pct": []} for t in TERMS}
        rows = []
        for i, held in enumerate(members):
            train = members[:i] + members[i + 1:]
            cal = Calibration((fit_group(key, train),), source="leave-one-out")
            before = compare(held)
            import copy

            h2 = copy.copy(held)
            predict(h2, calibration=cal)
            after = compare(h2)
            row = {"id": held.record_id, "terms": {}}
            for t in TERMS:
                if t in before and t in after:
                    b, bp = abs_err(t, *before[t])
                    a, ap = abs_err(t, *after[t])
                    for bucket in (per[t], pooled[t]):
                        bucket["before"].append(b)
                        bucket["after"].append(a)
                        if bp is not None:
                            bucket["before_pct"].append(bp)
                            bucket["after_pct"].append(ap)
                    row["terms"][t] = {"logged": before[t][1], "before": round(before[t][0], 3), "after": round(after[t][0], 3)}
            rows.append(row)
        res["groups"].append({"group": key.label(), "startups": len(members), "records": [m.record_id for m in members],
                              "terms": _summ(per), "rows": rows})
    res["pooled"] = _summ(pooled)
    return res


def _summ(per: dict) -> dict:
    out = {}
    for t, d in per.items():
        if not d["before"]:
            continue
        out[t] = {"n": len(d["before"]),
                  "median_abs_before": round(statistics.median(d["before"]), 3), "median_abs_after": round(statistics.median(d["after"]), 3),
                  "worst_abs_before": round(max(d["before"]), 3), "worst_abs_after": round(max(d["after"]), 3)}
        if d["before_pct"]:
            out[t]["median_pct_before"] = round(statistics.median(d["before_pct"]), 2)
            out[t]["median_pct_after"] = round(statistics.median(d["after_pct"]), 2)
    return out


def _cell(s: dict, unit: str) -> str:
    pct = f" ({s['median_pct_before']:.1f} → {s['median_pct_after']:.1f} %)" if "median_pct_before" in s else ""
    fmt = (lambda x: f"{x:,.0f}") if unit == "tokens" else (lambda x: f"{x:.2f}")
    return f"{fmt(s['median_abs_before'])} → {fmt(s['median_abs_after'])}{pct}"


def markdown(res: dict, ms: list, skipped: list, show_rows: bool) -> str:
    units = {"tokens": "tokens", "concurrency": "x"}
    out = [f"# Calibration, cross-validated: {len(ms)} start-ups matched by calibrate's pipeline (tests/data/calibration/startup.jsonl)", "",
           f"Leave one out within each group (GPU / release family / model family) of at least {MIN_RECORDS + 1} start-ups: "
           f"the held-out start-up is planned with the offsets of the other {MIN_RECORDS}+. "
           "Cells: median |predicted − logged| before → after (GiB unless stated; median |%| in brackets).", ""]
    head = "| group | n | " + " | ".join(TERMS) + " |"
    out += [head, "|" + "---|" * (len(TERMS) + 2)]
    for g in res["groups"]:
        out.append(f"| {g['group']} | {g['startups']} | " + " | ".join(_cell(g["terms"][t], units.get(t, "GiB")) if t in g["terms"] else "-" for t in TERMS) + " |")
    if res["pooled"]:
        n = sum(g["startups"] for g in res["groups"])
        out.append(f"| **all cross-validated** | {n} | " + " | ".join(_cell(res["pooled"][t], units.get(t, "GiB")) if t in res["pooled"] else "-" for t in TERMS) + " |")
    if res["too_small"]:
        out += ["", f"Groups too small to cross-validate (fewer than {MIN_RECORDS + 1} start-ups; calibrate refuses a term below {MIN_RECORDS}):",
                "; ".join(f"{x['group']} ({x['startups']}: {', '.join(x['records'])})" for x in res["too_small"])]
    if show_rows:
        out += ["", "## Held-out start-ups (logged / before / after)", ""]
        for g in res["groups"]:
            for row in g["rows"]:
                cells = ", ".join(f"{t} {v['logged']} / {v['before']} / {v['after']}" for t, v in row["terms"].items())
                out.append(f"- {g['group']} {row['id']}: {cells}")
    out += ["", f"Not used ({len(skipped)}): " + "; ".join(f"{i} ({w})" for i, w in skipped)]
    return "\n".join(out)


def evaluate() -> tuple[dict, list, list]:
    records = [json.loads(line) for line in corpus.DATA.read_text().splitlines() if line.strip()]
    with tempfile.TemporaryDirectory() as d:
        ms, skipped = matches(records, Path(d))
        res = cross_validate(ms)
    return res, ms, skipped


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--records", action="store_true", help="also list every held-out start-up")
    a = ap.parse_args()
    res, ms, skipped = evaluate()
    if a.json:
        res["matched"] = [m.record_id for m in ms]
        res["skipped"] = skipped
        print(json.dumps(res, indent=1, default=str))
    else:
        print(markdown(res, ms, skipped, a.records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
