"""Calibration: oomguard's start-up ledger against real vLLM start-up logs.

Reads tests/data/calibration/startup.jsonl (figures people published from real runs;
README.md there gives the schema) and plans every record whose inputs a prediction needs:
a model config (tests/data/calibration/configs/ first, then the bundled catalog), the GPU,
the parallel layout and the vLLM release. For each it compares, per GPU where vLLM prints
per GPU:

    weights, activation peak, non-torch, CUDA graphs, KV pool GiB, KV tokens, concurrency

and prints, per release family and per term, n / median / worst absolute % error.

"Tokens with the pool pinned": the logged KV GiB is fed back as --kv-cache-memory-bytes, at
both ends of its printed rounding (±0.005 GiB); vLLM's token count must fall inside. This
isolates the KV layout from the pool terms and should be exact to rounding.

"Leave one release out": every constant the memory model declares as fitted is re-fitted on
the records of the other release families and the held-out family is scored with it. A module
under oomguard.model declares its fitted constants in a dict ``FITTED_CONSTANTS`` (attribute
name -> the records it came from); when none declares any, the constants named in
``KNOWN_FITTED`` below (read from the code: activation.py says they were "calibrated on
tests/data/calibration") are used where they still exist. Constants written inline as literals
cannot be re-fitted and are listed as such.

Nothing here is a pass/fail target: tests/unit/test_calibration.py checks the records and that
this runs. The output is a measurement to quote.

    python benchmarks/calibration.py [--json] [--records] [--no-loro]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import math
import pkgutil
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from oomguard.errors import OomguardError  # noqa: E402
from oomguard.inputs.hardware import GPU, find_gpu_in_text, lookup_gpu  # noqa: E402
from oomguard.inputs.model_config import CATALOG_DIR, load_model  # noqa: E402
from oomguard.model.planner import plan_launch  # noqa: E402
from oomguard.units import GiB  # noqa: E402

DATA_DIR = ROOT / "tests" / "data" / "calibration"
DATA = DATA_DIR / "startup.jsonl"
CONFIG_DIRS = (DATA_DIR / "configs", Path(CATALOG_DIR))
TERMS = ("weights", "activation", "non_torch", "cuda_graph", "kv_pool", "tokens", "concurrency")
ROUNDING_GIB = 0.005  # vLLM prints the pool with two decimals
CONCURRENCY_ROUNDING = 0.005  # and the maximum concurrency ("12.34x")
SMALL_POOL_GIB = 1.0  # below this a % error on the pool says nothing; the GiB error is kept
OUTLIER_PCT = 10.0  # records listed by name when a term is off by more than this

# Read from main's code (oomguard/model/activation.py, "Coefficients were calibrated on
# tests/data/calibration"); used only when no module declares FITTED_CONSTANTS.
KNOWN_FITTED = {
    "oomguard.model.activation": ("FORWARD_ALPHA", "SAMPLER_C_V0", "SAMPLER_C_V1_EARLY", "SAMPLER_C_V1"),
}
# Constants that look fitted but are estimates or ranges (named here so the report says so).
INLINE_LITERALS = (
    "non_torch.CUDA_CONTEXT_BYTES 500 MiB: an estimate of the driver's context (range 0.3-0.8 GiB), outside the pool",
    "cudagraph.SPREAD_LOW/SPREAD_HIGH 0.5 / 2.0: the range around the fitted graph constants, not a point value",
)


# ---------------------------------------------------------------- record -> inputs


def version_of(r: dict) -> str | None:
    text = str(r.get("vllm_version") or r.get("vllm_version_estimate") or "")
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if m and m.group(1) == "0":
        return f"0.{m.group(2)}.{m.group(3) or 0}"
    if str(r.get("engine", "")).startswith("V0"):
        return "0.6.6"
    return None


def family(version: str) -> str:
    from oomguard.versions.releases import FAMILIES
    from oomguard.versions.releases import parse_version as pv

    v = pv(version)
    for fam in FAMILIES:
        if v is not None and fam.contains(v):
            return fam.name.rstrip("-") if fam.last_minor is not None else fam.name + "0.33"
    return "<0.6"


def gpu_of(r: dict) -> GPU | None:
    total = r.get("gpu_total_mem_gib")
    for text in (r.get("gpu_model"), r.get("gpu_model_estimate")):
        if not text:
            continue
        try:
            g = lookup_gpu(str(text), total)
        except OomguardError:
            g = find_gpu_in_text(str(text))
            if g is not None and total:
                g = lookup_gpu(g.name, total)
        if g is not None:
            return g
    return lookup_gpu(None, total) if total else None


def config_dir(name: str | None) -> Path | None:
    for d in CONFIG_DIRS:
        if name and (d / name).is_dir():
            return d / name
    return None


def flags_of(r: dict) -> dict:
    f: dict = {}
    for key in ("max_model_len", "max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization", "block_size"):
        if r.get(key) is not None:
            f[key] = r[key]
    if r.get("tp"):
        f["tensor_parallel_size"] = int(r["tp"])
    if r.get("pp"):
        f["pipeline_parallel_size"] = int(r["pp"])
    if r.get("kv_cache_dtype") and r["kv_cache_dtype"] != "auto":
        f["kv_cache_dtype"] = r["kv_cache_dtype"].split()[0]
    if r.get("enforce_eager") is True:
        f["enforce_eager"] = True
    if r.get("expert_parallel"):
        f["enable_expert_parallel"] = True
    if r.get("dtype") in ("float32", "float16"):
        f["dtype"] = r["dtype"]
    # flags the log's non-default args show, kept under "extra" (S075: prefix caching asked for
    # on a 0.24 hybrid, where it is off by default: Mamba align mode adds a block per group)
    extra = r.get("extra") if isinstance(r.get("extra"), dict) else {}
    for key in ("enable_prefix_caching", "limit_mm_per_prompt", "language_model_only"):
        if r.get(key, extra.get(key)) is not None:
            f[key] = r.get(key, extra.get(key))
    return f


def quant_flag(r: dict, model) -> str | None:
    """A checkpoint quantized differently from its config (config_note): inject the method.

    INT8 W8A8 has no flag of its own in the planner; fp8 stands in for it (1 byte per linear weight)."""
    q = str(r.get("quantization") or "").lower()
    if not q or model.quantization.is_quantized:
        return None
    for key, flag in (("nvfp4", "modelopt_fp4"), ("gptq", "gptq"), ("awq", "awq"), ("fp8", "fp8"), ("w8a8", "fp8"), ("bitsandbytes", "bitsandbytes")):
        if key in q:
            return flag
    return None


def prepare(r: dict, models: dict) -> tuple[dict | None, str | None]:
    """The planner inputs of one record, or why it cannot be planned."""
    d = config_dir(r.get("config"))
    if d is None:
        return None, "no model config"
    gpu = gpu_of(r)
    if gpu is None:
        return None, "GPU total unknown"
    if r.get("tp") is None and (r.get("num_gpus") or 1) > 1:
        return None, "parallel layout not stated"
    version = version_of(r)
    if version is None:
        return None, "vLLM version not stated (defaults and accounting differ by release)"
    if str(d) not in models:
        try:
            models[str(d)] = load_model(str(d))
        except OomguardError as exc:
            models[str(d)] = exc
    model = models[str(d)]
    if isinstance(model, OomguardError):
        return None, f"model not modelled: {str(model).split(': ', 1)[-1][:70]}"
    flags = flags_of(r)
    qf = quant_flag(r, model)
    if qf:
        flags["quantization"] = qf
    env = {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}
    if "V0" in str(r.get("engine", "")) and version >= "0.8":
        env["VLLM_USE_V1"] = "0"
    env.update(r.get("env") or {})  # the launch's own environment (e.g. VLLM_USE_V1=1 on 0.7)
    # The log names the sampler kernel where the release chose it at run time (0.8-0.11: FlashInfer
    # "when installed"): "Using FlashInfer for top-p & top-k sampling" is that choice, which a user
    # states with VLLM_USE_FLASHINFER_SAMPLER=1. A log whose workers differ (S104) is left unset.
    if "Using FlashInfer for top-p & top-k sampling" in str(r.get("raw_excerpt") or "") and \
            "mixed" not in str((r.get("extra") or {}).get("sampler_backend_logged") or ""):
        env.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "1")
    # Likewise the MXFP4 MoE kernel: sm90 took OAI Triton where triton_kernels was installed and
    # Marlin where it was not (S132's 0.10.1 log: "Weight-only FP4 compression ... Marlin").
    if str((r.get("extra") or {}).get("mxfp4_backend_logged") or "").lower() == "marlin":
        env.setdefault("VLLM_MXFP4_USE_MARLIN", "1")
    return {"model": model, "gpu": gpu, "flags": flags, "env": env, "version": version}, None


# ---------------------------------------------------------------- comparison


def pct(pred: float, real: float) -> float:
    return abs(pred - real) / abs(real) * 100 if real else math.inf


def _plan(inp: dict, extra_flags: dict | None = None):
    flags = dict(inp["flags"], **(extra_flags or {}))
    return plan_launch(inp["model"], inp["gpu"], flags, inp["env"], version=inp["version"], num_gpus=64)


def compare(r: dict, inp: dict) -> dict:
    """Predicted vs logged for one record: {term: (pred, logged)} plus pinned tokens."""
    plan = _plan(inp)
    rank = plan.tight_rank
    row: dict = {"id": r["id"], "config": r["config"], "version": inp["version"], "family": family(inp["version"]),
                 "gpu": inp["gpu"].name, "tp": inp["flags"].get("tensor_parallel_size", 1),
                 "evidence": r.get("evidence_form"), "version_stated": bool(r.get("vllm_version")), "terms": {}}
    t = row["terms"]
    logged_w = r.get("weights_gib") or r.get("weights_gb_as_logged")
    if logged_w:
        t["weights"] = (rank.weights.bytes / GiB, float(logged_w))
    act = r.get("activation_peak_gib")
    note = str((r.get("extra") or {}).get("activation_note") or "")
    if act is not None and not note:
        t["activation"] = (rank.activation.bytes / GiB, float(act))
    elif act is not None and "includes weights" in note and logged_w:
        # 0.6.4's one-line summary prints peak_torch_memory, the weights included
        t["activation"] = (rank.activation.bytes / GiB, float(act) - float(logged_w))
    if r.get("non_torch_gib") is not None:
        t["non_torch"] = (rank.non_torch.bytes / GiB, float(r["non_torch_gib"]))
    if r.get("cuda_graph_gib") is not None and float(r["cuda_graph_gib"]) > 0:
        t["cuda_graph"] = (rank.cuda_graph.bytes / GiB, float(r["cuda_graph_gib"]))
    if r.get("kv_cache_gib") is not None:
        t["kv_pool"] = (rank.kv_bytes / GiB, float(r["kv_cache_gib"]))
    if r.get("kv_cache_tokens"):
        t["tokens"] = (plan.kv_cache_tokens, int(r["kv_cache_tokens"]))
    if r.get("max_concurrency") and r.get("concurrency_for_len") == plan.settings.max_model_len:
        t["concurrency"] = (plan.max_concurrency, float(r["max_concurrency"]))
    row["outcome"] = {"predicted_starts": plan.starts, "predicted_failure": plan.failure.value if plan.failure else None,
                      "logged": r.get("startup_outcome")}
    row["model_family"] = model_family(plan.model)
    if r.get("kv_cache_gib") is not None and r.get("kv_cache_tokens") and float(r["kv_cache_gib"]) > 0:
        kv = float(r["kv_cache_gib"])
        ends, conc = [], []
        for g in (kv - ROUNDING_GIB, kv + ROUNDING_GIB):
            p = _plan(inp, {"kv_cache_memory_bytes": int(g * GiB)})
            ends.append(p.kv_cache_tokens)
            conc.append(p.max_concurrency)
        row["pinned_tokens"] = (min(ends), max(ends), int(r["kv_cache_tokens"]))
        if r.get("max_concurrency") and r.get("concurrency_for_len") == plan.settings.max_model_len:
            # vLLM prints the concurrency with two decimals
            row["pinned_concurrency"] = (round(min(conc) - CONCURRENCY_ROUNDING, 4), round(max(conc) + CONCURRENCY_ROUNDING, 4),
                                         float(r["max_concurrency"]))
    return row


def model_family(model) -> str:
    """dense / moe / mla / hybrid (Mamba, GDN or sliding-window groups) / multimodal: the layouts
    whose KV accounting differs (hybrids: per-group concurrency, state blocks)."""
    from oomguard.model.description import LayerKind

    kinds = {layer.kind for layer in model.layers}
    if LayerKind.MAMBA in kinds or str(model.family).startswith("hybrid"):
        return "hybrid (state-space / linear attention)"
    if LayerKind.SLIDING_WINDOW in kinds or LayerKind.CHUNKED_LOCAL in kinds:
        return "hybrid (sliding window / chunked)"
    if model.mla is not None or LayerKind.MLA in kinds:
        return "mla"
    if model.moe is not None:
        return "moe"
    return "multimodal" if model.is_multimodal else "dense"


def evaluate_rows(records: list[dict], models: dict) -> tuple[list[dict], list[tuple[str, str]]]:
    rows, skipped = [], []
    for r in records:
        inp, why = prepare(r, models)
        if inp is None:
            skipped.append((r["id"], why))
            continue
        try:
            row = compare(r, inp)
        except OomguardError as exc:
            skipped.append((r["id"], f"plan error: {exc}"))
            continue
        if row["terms"]:
            rows.append(row)
        else:
            skipped.append((r["id"], "no logged memory figure to compare"))
    return rows, skipped


def term_error(term: str, pred: float, real: float) -> float | None:
    """% error, or None where a % says nothing (a pool under 1 GiB or negative)."""
    if term == "kv_pool" and real < SMALL_POOL_GIB:
        return None
    return pct(pred, real)


def stats(rows: list[dict], term: str) -> dict | None:
    errs = [e for row in rows if term in row["terms"] for e in [term_error(term, *row["terms"][term])] if e is not None]
    if not errs:
        return None
    worst = max((row for row in rows if term in row["terms"] and term_error(term, *row["terms"][term]) is not None),
                key=lambda row: term_error(term, *row["terms"][term]))
    out = {"n": len(errs), "median_pct": round(statistics.median(errs), 2), "worst_pct": round(max(errs), 2),
           "worst_id": worst["id"], "within_5pct": sum(e <= 5 for e in errs), "within_10pct": sum(e <= 10 for e in errs)}
    if term in ("kv_pool", "weights", "activation", "non_torch", "cuda_graph"):
        gib = [abs(row["terms"][term][0] - row["terms"][term][1]) for row in rows if term in row["terms"]]
        out["median_abs_gib"] = round(statistics.median(gib), 3)
        out["worst_abs_gib"] = round(max(gib), 3)
    return out


def summarize(rows: list[dict]) -> dict:
    fams = sorted({row["family"] for row in rows}, key=_fam_key)
    by_family = {f: {t: stats([r for r in rows if r["family"] == f], t) for t in TERMS} for f in fams}
    overall = {t: stats(rows, t) for t in TERMS}
    pinned = [row["pinned_tokens"] for row in rows if "pinned_tokens" in row]
    misses = [row["id"] for row in rows if "pinned_tokens" in row and not (row["pinned_tokens"][0] <= row["pinned_tokens"][2] <= row["pinned_tokens"][1])]
    outliers = sorted(
        ({"id": row["id"], "family": row["family"], "term": t, "predicted": round(row["terms"][t][0], 2), "logged": row["terms"][t][1],
          "pct": round(e, 1)}
         for row in rows for t in ("weights", "activation", "kv_pool", "tokens", "concurrency") if t in row["terms"]
         for e in [term_error(t, *row["terms"][t])] if e is not None and e > OUTLIER_PCT),
        key=lambda o: -o["pct"])
    pc = [row for row in rows if "pinned_concurrency" in row]
    pc_miss = [row["id"] for row in pc if not (row["pinned_concurrency"][0] <= row["pinned_concurrency"][2] <= row["pinned_concurrency"][1])]
    mfams = sorted({row.get("model_family", "?") for row in rows})
    by_model_family = {}
    for f in mfams:
        sub = [r for r in rows if r.get("model_family") == f]
        pin = [r for r in sub if "pinned_tokens" in r]
        by_model_family[f] = {
            **{t: stats(sub, t) for t in ("weights", "kv_pool", "tokens", "concurrency")},
            "pinned_tokens": [sum(r["pinned_tokens"][0] <= r["pinned_tokens"][2] <= r["pinned_tokens"][1] for r in pin), len(pin)],
            "pinned_concurrency": [sum(1 for r in sub if "pinned_concurrency" in r and r["id"] not in pc_miss),
                                   sum(1 for r in sub if "pinned_concurrency" in r)],
        }
    agree = [row for row in rows if row["outcome"]["logged"]]
    same = [row for row in agree if row["outcome"]["predicted_starts"] == str(row["outcome"]["logged"]).startswith("success")]
    return {"overall": overall, "by_family": by_family,
            "pinned_tokens": {"n": len(pinned), "exact_to_rounding": len(pinned) - len(misses), "misses": misses},
            "pinned_concurrency": {"n": len(pc), "exact_to_rounding": len(pc) - len(pc_miss), "misses": pc_miss},
            "by_model_family": by_model_family,
            "outliers": outliers,
            "outcome": {"n": len(agree), "agree": len(same), "disagree": [r["id"] for r in agree if r not in same]}}


def _fam_key(f: str) -> tuple:
    m = re.match(r"0\.(\d+)", f)
    return (int(m.group(1)) if m else -1,)


# ---------------------------------------------------------------- leave one release out


def fitted_constants() -> tuple[list[tuple[str, str]], str]:
    """(module, attribute) pairs of the fitted constants, and where the list came from."""
    import oomguard.model as pkg

    declared: list[tuple[str, str]] = []
    for info in pkgutil.walk_packages(pkg.__path__, "oomguard.model."):
        try:
            mod = importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - a module that fails to import is not ours to judge here
            continue
        for name in getattr(mod, "FITTED_CONSTANTS", {}) or {}:
            if isinstance(getattr(mod, name, None), (int, float)):
                declared.append((info.name, name))
    if declared:
        return declared, "FITTED_CONSTANTS declared in oomguard.model"
    found = []
    for modname, names in KNOWN_FITTED.items():
        mod = importlib.import_module(modname)
        found += [(modname, n) for n in names if isinstance(getattr(mod, n, None), (int, float))]
    return found, "KNOWN_FITTED (read from the code; no module declares FITTED_CONSTANTS)"


@contextlib.contextmanager
def patched(values: dict[tuple[str, str], float]):
    old = {}
    try:
        for (modname, name), v in values.items():
            mod = importlib.import_module(modname)
            old[(modname, name)] = getattr(mod, name)
            setattr(mod, name, type(old[(modname, name)])(v) if isinstance(old[(modname, name)], int) else v)
        yield
    finally:
        for (modname, name), v in old.items():
            setattr(importlib.import_module(modname), name, v)


def _pool_loss(cases: list[tuple[dict, dict]]) -> float:
    errs = []
    for r, inp in cases:
        try:
            kv = _plan(inp).tight_rank.kv_bytes / GiB
        except OomguardError:
            continue
        e = term_error("kv_pool", kv, float(r["kv_cache_gib"]))
        if e is not None:
            errs.append(e)
    return statistics.median(errs) if errs else math.inf


GRID = (0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0)
PASSES = 2


def leave_one_release_out(records: list[dict], models: dict) -> dict:
    consts, origin = fitted_constants()
    cases = []
    for r in records:
        if r.get("kv_cache_gib") is None:
            continue
        inp, _ = prepare(r, models)
        if inp is not None:
            cases.append((r, inp))
    fams = sorted({family(inp["version"]) for _, inp in cases}, key=_fam_key)
    base = {c: getattr(importlib.import_module(c[0]), c[1]) for c in consts}
    out = {"constants": [f"{m.rsplit('.', 1)[-1]}.{n}" for m, n in consts], "source": origin,
           "not_refittable": list(INLINE_LITERALS), "objective": "median |KV pool % error| on the training families",
           "grid": list(GRID), "passes": PASSES, "families": {}}
    if not consts:
        out["note"] = "no fitted constant can be re-fitted automatically: per-family errors above are the whole story"
        return out
    for held in fams:
        train = [(r, i) for r, i in cases if family(i["version"]) != held]
        test = [(r, i) for r, i in cases if family(i["version"]) == held]
        values = dict(base)
        for _ in range(PASSES):  # coordinate descent over a multiplicative grid
            for c in consts:
                # start from the current value: a constant the training records do not
                # constrain (e.g. a V0-only one with V0 held out) stays where it was
                with patched(values):
                    best = (_pool_loss(train), values[c])
                for g in GRID:
                    trial = {**values, c: base[c] * g}
                    with patched(trial):
                        loss = _pool_loss(train)
                    if loss < best[0] - 1e-9:
                        best = (loss, base[c] * g)
                values[c] = best[1]
        with patched(values):
            held_err = _pool_loss(test)
        out["families"][held] = {
            "n_train": len(train), "n_test": len(test),
            "refit": {f"{m.rsplit('.', 1)[-1]}.{n}": round(values[(m, n)] / base[(m, n)], 3) for m, n in consts},
            "held_out_median_pct": round(held_err, 2) if math.isfinite(held_err) else None,
            "shipped_median_pct": round(_pool_loss(test), 2) if test else None,
        }
    return out


# ---------------------------------------------------------------- output


def evaluate(loro: bool = True) -> dict:
    records = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    models: dict = {}
    rows, skipped = evaluate_rows(records, models)
    res = {"records": len(records), "usable": len(rows), "rows": rows, "skipped": skipped, "summary": summarize(rows)}
    if loro:
        res["leave_one_release_out"] = leave_one_release_out(records, models)
    return res


def _cell(s: dict | None) -> str:
    return "-" if not s else f"{s['n']}: {s['median_pct']:.1f} / {s['worst_pct']:.1f}"


def markdown(res: dict, show_records: bool) -> str:
    out = [f"# Calibration: {res['usable']} usable of {res['records']} records (tests/data/calibration/startup.jsonl)", "",
           "Absolute % error of oomguard's prediction against the logged figure, per GPU. Cells: `n: median / worst`.",
           f"KV pools under {SMALL_POOL_GIB:g} GiB (or negative) are left out of the % columns (their GiB error is in --json).", ""]
    s = res["summary"]
    head = "| family | " + " | ".join(TERMS) + " |"
    out += [head, "|" + "---|" * (len(TERMS) + 1)]
    for fam, terms in s["by_family"].items():
        out.append(f"| {fam} | " + " | ".join(_cell(terms[t]) for t in TERMS) + " |")
    out.append("| **all** | " + " | ".join(_cell(s["overall"][t]) for t in TERMS) + " |")
    out += ["", "| term | n | median % | worst % (record) | within 5 % | within 10 % | median / worst GiB |", "|---|---|---|---|---|---|---|"]
    for t in TERMS:
        v = s["overall"][t]
        if v:
            gib = f"{v['median_abs_gib']} / {v['worst_abs_gib']}" if "median_abs_gib" in v else "-"
            out.append(f"| {t} | {v['n']} | {v['median_pct']} | {v['worst_pct']} ({v['worst_id']}) | {v['within_5pct']} | {v['within_10pct']} | {gib} |")
    p = s["pinned_tokens"]
    out += ["", f"Tokens with the pool pinned to the logged GiB (±{ROUNDING_GIB} rounding): {p['exact_to_rounding']}/{p['n']} exact"
            + (f"; misses: {', '.join(p['misses'])}" if p["misses"] else "")]
    pc = s["pinned_concurrency"]
    out.append(f"Maximum concurrency with the pool pinned (±{CONCURRENCY_ROUNDING} printed rounding): {pc['exact_to_rounding']}/{pc['n']} exact"
               + (f"; misses: {', '.join(pc['misses'])}" if pc["misses"] else ""))
    out += ["", "| model family | weights | kv_pool | tokens | concurrency | pinned tokens exact | pinned concurrency exact |",
            "|---|---|---|---|---|---|---|"]
    for f, v in s["by_model_family"].items():
        out.append(f"| {f} | " + " | ".join(_cell(v[t]) for t in ("weights", "kv_pool", "tokens", "concurrency"))
                   + f" | {v['pinned_tokens'][0]}/{v['pinned_tokens'][1]} | {v['pinned_concurrency'][0]}/{v['pinned_concurrency'][1]} |")
    o = s["outcome"]
    out.append(f"Start / fail verdict agrees with the log: {o['agree']}/{o['n']}" + (f"; disagrees: {', '.join(o['disagree'])}" if o["disagree"] else ""))
    if s["outliers"]:
        out += ["", f"## Terms off by more than {OUTLIER_PCT:g} % (record, term: predicted / logged)", ""]
        out += [f"- {x['id']} ({x['family']}) {x['term']}: {x['predicted']} / {x['logged']} ({x['pct']} %)" for x in s["outliers"]]
    lo = res.get("leave_one_release_out")
    if lo:
        out += ["", f"## Leave one release family out ({lo['source']})", "",
                f"Re-fitted: {', '.join(lo['constants']) or 'none'}; objective: {lo['objective']}; grid ×{lo['grid']}, {lo['passes']} coordinate-descent passes.",
                f"Not re-fitted (estimates and ranges, not fitted values): {'; '.join(lo['not_refittable'])}.", ""]
        if lo.get("note"):
            out.append(lo["note"])
        else:
            out += ["| held-out family | train / test | KV pool median %: shipped | re-fitted without it | factors |", "|---|---|---|---|---|"]
            for fam, v in lo["families"].items():
                fac = ", ".join(f"{k.split('.')[-1]}×{x}" for k, x in v["refit"].items() if x != 1.0) or "unchanged"
                out.append(f"| {fam} | {v['n_train']} / {v['n_test']} | {v['shipped_median_pct']} | {v['held_out_median_pct']} | {fac} |")
    if show_records:
        out += ["", "## Records (predicted / logged)", "", "| id | family | gpu | tp | " + " | ".join(TERMS) + " | pinned tokens |", "|" + "---|" * (len(TERMS) + 5)]
        for row in res["rows"]:
            cells = []
            for t in TERMS:
                if t in row["terms"]:
                    a, b = row["terms"][t]
                    cells.append(f"{a:.2f} / {b:.2f}" if isinstance(b, float) else f"{a} / {b}")
                else:
                    cells.append("-")
            pt = row.get("pinned_tokens")
            pin = f"{pt[0]}–{pt[1]} / {pt[2]}" if pt else "-"
            out.append(f"| {row['id']} | {row['family']} | {row['gpu']} | {row['tp']} | " + " | ".join(cells) + f" | {pin} |")
    out += ["", f"Not planned ({len(res['skipped'])}): " + "; ".join(f"{i} ({w})" for i, w in res["skipped"])]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    ap.add_argument("--records", action="store_true", help="also print every record's predicted / logged figures")
    ap.add_argument("--no-loro", action="store_true", help="skip the leave-one-release-out re-fit (the slow part)")
    a = ap.parse_args()
    res = evaluate(loro=not a.no_loro)
    if a.json:
        print(json.dumps(res, indent=1, default=str))
    else:
        print(markdown(res, a.records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
