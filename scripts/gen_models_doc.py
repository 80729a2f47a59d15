#!/usr/bin/env python3
"""Generate docs/models.md and src/oomguard/data/coverage.json from the registry sweep.

    python scripts/gen_models_doc.py            # write both
    python scripts/gen_models_doc.py --check    # exit 1 when either is stale

Inputs (committed data): tests/data/oracle/sweep_vllm-0.32.0.json (scripts/vllm_registry_sweep.py:
what vLLM 0.32's own code computes per architecture) and tests/data/oracle/registry_vllm-0.33.0.json
(scripts/read_vllm_registry.py: 0.33's registry, read from its source). oomguard is run on every
swept config (scripts/sweep_compare.py), so both outputs change when oomguard's numbers do:
tests/unit/test_registry_sweep.py runs the same comparison and fails on any drift.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "scripts"))

import sweep_compare as sc  # noqa: E402

SWEEP = REPO / "tests" / "data" / "oracle" / "sweep_vllm-0.32.0.json"
NEXT_REGISTRY = REPO / "tests" / "data" / "oracle" / "registry_vllm-0.33.0.json"
DOC = REPO / "docs" / "models.md"
COVERAGE = REPO / "src" / "oomguard" / "data" / "coverage.json"
TABLE_ORDER = ("text-generation", "multimodal", "embedding", "late-interaction", "reward", "token-classification",
               "sequence-classification", "transformers-backend-model", "speculative-decoding", "transformers-backend")
LEVELS = ("native-exact", "native", "generic", "refused", "unchecked", "no-config", "not-run")
# The generic path's range: the central 90 % of its signed errors over the swept architectures.
RANGE_QUANTILES = (0.05, 0.95)


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:+.1f} %"


def _round(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(float(x), nd)


def compare_all(sweep: dict) -> list[dict]:
    out = []
    for case in sweep["cases"]:
        native = sc.compare_case(case)
        generic = sc.compare_case(case, force_generic=True) if native["path"] != "generic" else native
        out.append({"case": case, "native": native, "generic": generic, "level": sc.level(case, native, generic)})
    return out


def _raw_quantiles(values: list[float]) -> tuple[float, float]:
    v = sorted(values)

    def q(p: float) -> float:
        i = min(len(v) - 1, max(0, round(p * (len(v) - 1))))
        return v[i]

    return q(RANGE_QUANTILES[0]), q(RANGE_QUANTILES[1])


def _quantiles(values: list[float]) -> list[float] | None:
    """The central range, rounded outward to 4 decimals: rounding to nearest turned a 95th percentile of +0.001 %
    into +0.0 % and left the cases at +0.001 % "outside" a range they are inside."""
    if not values:
        return None
    lo, hi = _raw_quantiles(values)
    return [math.floor(round(lo * 1e4, 6)) / 1e4, math.ceil(round(hi * 1e4, 6)) / 1e4]


def generic_ranges(results: list[dict]) -> dict:
    """Signed errors (oomguard / vLLM − 1) of the generic path, per estimate, over every swept case
    vLLM built and the generic path read (native architectures included: the generic path was run
    on them too)."""
    errs: dict[str, list[float]] = {"weights": [], "kv_tokens": [], "concurrency": [], "activation": []}
    n = 0
    for r in results:
        g = r["generic"]
        if "error" in (r["case"].get("vllm") or {}) or g["path"] == "refused" or g.get("distance") is None:
            continue
        n += 1
        if "total_err" in (g.get("weights") or {}):
            errs["weights"].append(g["weights"]["total_err"])
        if "tokens_err" in (g.get("kv") or {}):
            errs["kv_tokens"].append(g["kv"]["tokens_err"])
        if "concurrency_err" in (g.get("pinned") or {}):
            errs["concurrency"].append(g["pinned"]["concurrency_err"])
        if "err" in (g.get("activation") or {}):
            errs["activation"].append(g["activation"]["err"])
    ranges = {k: _quantiles(v) for k, v in errs.items()}
    outside = {}
    for k, v in errs.items():
        rng = ranges[k]
        if not rng:
            continue
        out = [e for e in v if e < rng[0] or e > rng[1]]
        outside[k] = {"count": len(out), "worst": [round(min(v), 4), round(max(v), 4)]}
    return {
        "basis": f"central {round((RANGE_QUANTILES[1] - RANGE_QUANTILES[0]) * 100)} % of the generic path's signed errors "
                 f"(oomguard / vLLM − 1) over {n} swept configs vLLM {sweep_version()} built",
        "cases": n,
        **ranges,
        "counts": {k: len(v) for k, v in errs.items()},
        "outside": outside,
    }


_VERSION: list[str] = []


def sweep_version() -> str:
    return _VERSION[0] if _VERSION else "0.32.0"


def coverage_data(sweep: dict, results: list[dict]) -> dict:
    by_case = {r["case"]["id"]: r for r in results}
    archs: dict[str, dict] = {}
    for row in sweep["registry"]:
        arch = row["architecture"]
        r = by_case.get(arch)
        if r is None:
            level = "not-run" if "not_run" in row else "no-config"
            archs[arch] = {"level": level, "table": row["table"], "why": row.get("not_run") or row.get("no_config", "")}
            continue
        lv = r["level"]
        e = {"level": lv["level"], "table": row["table"], "path": lv.get("path")}
        if r["native"].get("model_type"):
            e["model_type"] = r["native"]["model_type"]
        if lv.get("distance") is not None:
            e["distance"] = _round(lv["distance"])
        if r["generic"].get("distance") is not None:
            e["generic_distance"] = _round(r["generic"]["distance"])
        if lv.get("why"):
            e["why"] = lv["why"][:300]
        archs[arch] = e
    variants = {}
    for r in results:
        cid = r["case"]["id"]
        if cid == r["case"]["architecture"]:
            continue
        lv = r["level"]
        variants[cid] = {"level": lv["level"], "quantized": r["case"].get("quantized"), "distance": _round(lv.get("distance")),
                         **({"why": lv["why"][:300]} if lv.get("why") else {})}
    return {
        "generated_by": "scripts/gen_models_doc.py",
        "vllm_version": sweep["vllm_version"],
        "source": "tests/data/oracle/sweep_vllm-0.32.0.json",
        "generic_ranges": generic_ranges(results),
        "architectures": dict(sorted(archs.items())),
        "variants": dict(sorted(variants.items())),
    }


def _summary_rows(sweep: dict, cov: dict) -> list[str]:
    lines = ["| registry table | architectures | native-exact | native (≤ 5 % / more) | generic (≤ 5 % / more) | refused | not checked | no config | not run |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    total = {k: 0 for k in ("n", "ne", "n5", "nm", "g5", "gm", "r", "u", "nc", "nr")}
    for table in TABLE_ORDER:
        rows = [a for a, e in cov["architectures"].items() if e["table"] == table]
        if not rows:
            continue
        c = {k: 0 for k in total}
        for a in rows:
            e = cov["architectures"][a]
            lv, d = e["level"], e.get("distance")
            c["n"] += 1
            if lv == "native-exact":
                c["ne"] += 1
            elif lv == "native":
                c["n5" if d is not None and d <= 0.05 else "nm"] += 1
            elif lv == "generic":
                c["g5" if d is not None and d <= 0.05 else "gm"] += 1
            elif lv == "refused":
                c["r"] += 1
            elif lv == "unchecked":
                c["u"] += 1
            elif lv == "no-config":
                c["nc"] += 1
            else:
                c["nr"] += 1
        for k in total:
            total[k] += c[k]
        lines.append(f"| {table} | {c['n']} | {c['ne']} | {c['n5']} / {c['nm']} | {c['g5']} / {c['gm']} | {c['r']} | {c['u']} | {c['nc']} | {c['nr']} |")
    t = total
    lines.append(f"| **all** | **{t['n']}** | **{t['ne']}** | **{t['n5']} / {t['nm']}** | **{t['g5']} / {t['gm']}** | **{t['r']}** | **{t['u']}** | **{t['nc']}** | **{t['nr']}** |")
    return lines


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _arch_line(row: dict, r: dict | None, e: dict) -> str:
    lv = e["level"]
    if r is None:
        return f"| {row['architecture']} | {row['module']} | – | – | **{lv}** | – | – | – | – | {_cell(e.get('why', ''))} |"
    case, n = r["case"], r["native"]
    word = {"native-exact": "**native-exact**", "native": f"**native** within {_pct(e.get('distance'))[1:]}",
            "generic": f"**generic** within {_pct(e.get('distance'))[1:]}", "refused": "**refused**",
            "unchecked": "**not checked**"}[lv]
    if lv in ("native", "generic") and e.get("distance") is None:
        word = f"**{lv}** (not comparable)"
    kv = n.get("kv") or {}
    kv_cell = "exact" if kv.get("exact") else (_pct(kv.get("tokens_err")) + ("" if kv.get("layers_match", True) and kv.get("groups_match", True) else ", layout differs") if kv else "–")
    p = n.get("pinned") or {}
    conc = "exact" if p.get("exact") else (_pct(p.get("concurrency_err")) if p else "–")
    w = n.get("weights") or {}
    wc = _pct(w.get("total_err")) if "total_err" in w else "–"
    a = n.get("activation") or {}
    ac = _pct(a.get("err")) if "err" in a else "–"
    path = n["path"] if n["path"] != "native" else f"native ({n.get('family')})"
    gen = "" if n["path"] == "generic" else (f"generic path: {_pct(e.get('generic_distance'))[1:]}" if e.get("generic_distance") is not None else "")
    notes = "; ".join(x for x in (_cell((e.get("why") or "")[:220]), gen) if x)
    src = case["source"].replace("transformers ", "tf ").replace(" defaults", "")
    return (f"| {row['architecture']} | {row['module']} | {_cell(src)} | {path} | {word} | {kv_cell} | {conc} | {wc} | {ac} | "
            f"{notes} |")


def render_doc(sweep: dict, nxt: dict | None, results: list[dict], cov: dict) -> str:
    by_case = {r["case"]["id"]: r for r in results}
    gr = cov["generic_ranges"]
    out = [
        "# Model coverage: every architecture vLLM serves, checked against vLLM's own code",
        "",
        "<!-- Generated by scripts/gen_models_doc.py from tests/data/oracle/sweep_vllm-0.32.0.json; do not edit. -->",
        "",
        f"For every architecture in vLLM {sweep['vllm_version']}'s model registry, scripts/vllm_registry_sweep.py built a "
        "few-layer variant of a config (a bundled public config where the repository has one, else the config class's "
        "defaults, written as `save_pretrained` writes them) and asked vLLM's own code, on the CPU build with CUDA's "
        "backend choices restored, for the KV-cache spec of every layer and the KV-cache groups, the weight bytes of the "
        "model it builds (meta device), the KV tokens and maximum concurrency of a pinned pool "
        f"({sweep['pinned_blocks']:,} blocks) and, where the variant is small enough to run on a CPU, the activation "
        "peak of its forward. oomguard is run on the same config and compared (scripts/sweep_compare.py); "
        "tests/unit/test_registry_sweep.py fails when oomguard's numbers move away from this table.",
        "",
        "Levels:",
        "",
        "- **native-exact**: an adapter checked on this `model_type`; KV layout, pinned-pool tokens and concurrency, and "
        "max_model_len equal to vLLM's, weights within 0.5 %, activation within 5 %;",
        "- **native within x %**: an adapter, with x the largest relative error over KV tokens, concurrency, weights and "
        "activation (the notes say which);",
        "- **generic within x %**: no adapter; the generic path (standard config fields) gives the plan, marked "
        "`generic: <model_type> is not checked against vLLM's code for this architecture`, with its assumptions and a "
        "range on each estimate;",
        "- **refused (why)**: oomguard will not plan it (exit 3), with the reason;",
        "- **not checked**: vLLM's CPU build could not build the config the sweep had (a class-default config missing a "
        "field real checkpoints carry, a CUDA-only kernel, ...); the path oomguard takes is shown, not verified;",
        "- **no config** / **not run**: no public config in the repository and no config class to take defaults from; "
        "speculative-decoding heads and the Transformers-backend wrappers are listed, not run.",
        "",
        f"## Summary (vLLM {sweep['vllm_version']})",
        "",
        *_summary_rows(sweep, cov),
        "",
        "## The generic path's measured distance from vLLM",
        "",
        f"Over {gr['cases']} swept configs vLLM built and the generic path read (it is run on native architectures "
        "too), the signed error oomguard / vLLM − 1 of each estimate ("
        f"{int(RANGE_QUANTILES[0] * 100)}th–{int(RANGE_QUANTILES[1] * 100)}th percentile); a generic plan prints these "
        "as its ranges:",
        "",
        "| estimate | range | cases | outside the range (worst) |",
        "|---|---|---:|---|",
    ]
    for k, label in (("weights", "weights"), ("kv_tokens", "KV tokens for a given pool"),
                     ("concurrency", "maximum concurrency"), ("activation", "activation peak")):
        rng = gr.get(k)
        o = (gr.get("outside") or {}).get(k)
        worst = f"{o['count']} ({_pct(o['worst'][0])} / {_pct(o['worst'][1])})" if o else "–"
        out.append(f"| {label} | {'–' if not rng else _pct(rng[0]) + ' to ' + _pct(rng[1])} | {gr['counts'][k]} | {worst} |")
    out += ["", f"## vLLM {sweep['vllm_version']}, per architecture", "",
            "Columns: the config the sweep used; oomguard's path (the adapter family, generic, refused); the level; "
            "KV tokens for vLLM's pool (`exact`, or the error); maximum concurrency with the pool pinned; weights; "
            "activation; notes.", ""]
    for table in TABLE_ORDER:
        rows = [r for r in sweep["registry"] if r["table"] == table]
        if not rows:
            continue
        out += [f"### {table} ({len(rows)})", "",
                "| architecture | vLLM module | config | oomguard | level | KV tokens | concurrency | weights | activation | notes |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        for row in rows:
            out.append(_arch_line(row, by_case.get(row["architecture"]), cov["architectures"][row["architecture"]]))
        out.append("")
    if cov["variants"]:
        out += ["### quantized and other catalog variants", "",
                "| case | quantization | level | distance | notes |", "|---|---|---|---|---|"]
        for cid, v in cov["variants"].items():
            out.append(f"| {cid} | {v.get('quantized') or '–'} | {v['level']} | {_pct(v.get('distance'))[1:] if v.get('distance') is not None else '–'} | {_cell(v.get('why', ''))} |")
        out.append("")
    if nxt:
        known = {r["architecture"] for r in sweep["registry"]}
        new = [r for r in nxt["registry"] if r["architecture"] not in known]
        gone = sorted(known - {r["architecture"] for r in nxt["registry"]})
        out += [f"## vLLM {nxt['vllm_version']} (commit {nxt['commit']}): architectures new since {sweep['vllm_version']}", "",
                f"Read from {nxt['vllm_version']}'s source (scripts/read_vllm_registry.py; its CUDA build does not run here): "
                "**not oracle-checked**. oomguard plans them natively where an adapter registers their `model_type`, "
                "else through the generic path, marked as such.", "",
                "| architecture | registry table | vLLM module | class |", "|---|---|---|---|"]
        for r in new:
            out.append(f"| {r['architecture']} | {r['table']} | {r['module']} | {r['class']} |")
        if gone:
            out += ["", f"Removed in {nxt['vllm_version']}: {', '.join(gone)}."]
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def build() -> tuple[str, str]:
    sweep = json.loads(SWEEP.read_text())
    _VERSION[:] = [sweep["vllm_version"]]
    nxt = json.loads(NEXT_REGISTRY.read_text()) if NEXT_REGISTRY.is_file() else None
    results = compare_all(sweep)
    cov = coverage_data(sweep, results)
    doc = render_doc(sweep, nxt, results, cov)
    return doc, dump_coverage(cov)


def dump_coverage(cov: dict) -> str:
    head = {k: v for k, v in cov.items() if k not in ("architectures", "variants")}
    lines = ["{"] + [f" {json.dumps(k)}: {json.dumps(v, sort_keys=True)}," for k, v in head.items()]
    for key in ("architectures", "variants"):
        body = ",\n".join(f"  {json.dumps(a)}: {json.dumps(e, sort_keys=True)}" for a, e in cov[key].items())
        lines.append(f' {json.dumps(key)}: {{\n{body}\n }}' + ("," if key == "architectures" else ""))
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    args = ap.parse_args()
    doc, cov = build()
    if args.check:
        stale = [p for p, text in ((DOC, doc), (COVERAGE, cov)) if not p.is_file() or p.read_text() != text]
        for p in stale:
            print(f"{p.relative_to(REPO)} is stale: run python scripts/gen_models_doc.py", file=sys.stderr)
        return 1 if stale else 0
    DOC.write_text(doc)
    COVERAGE.write_text(cov)
    print(f"wrote {DOC.relative_to(REPO)} ({doc.count(chr(10))} lines) and {COVERAGE.relative_to(REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
