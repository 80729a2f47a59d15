"""Calibration: oomguard's predictions against real vLLM start-up logs.

Reads tests/data/calibration/startup.jsonl (numbers people published from real
runs) and, for every record with the inputs a prediction needs (a model config,
the GPU total, the parallel layout), prints predicted vs logged weights,
activation peak, KV pool GiB, KV tokens and concurrency, then a summary:
median and worst absolute % error and the count within 5 %.

Also checks "tokens from a logged KV GiB": feeding the logged KV pool into
oomguard's KV layout must give the logged token count, up to the rounding of
the printed GiB (±0.005 GiB).

    python benchmarks/calibration.py [--json] [--verbose]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from oomguard.errors import OomguardError  # noqa: E402
from oomguard.inputs.hardware import GPU, lookup_gpu  # noqa: E402
from oomguard.inputs.model_config import CATALOG_DIR, load_model  # noqa: E402
from oomguard.model.engine import tokens_logged_by_groups  # noqa: E402
from oomguard.model.planner import plan_launch  # noqa: E402
from oomguard.units import GiB  # noqa: E402

DATA = ROOT / "tests" / "data" / "calibration" / "startup.jsonl"


def _version(r: dict) -> str | None:
    text = str(r.get("vllm_version") or r.get("vllm_version_estimate") or "")
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if m and m.group(1) == "0":
        return f"0.{m.group(2)}.{m.group(3) or 0}"
    if str(r.get("engine", "")).startswith("V0"):
        return "0.6.6"
    return None


def _gpu(r: dict) -> GPU | None:
    total = r.get("gpu_total_mem_gib")
    name = r.get("gpu_model") or r.get("gpu_model_estimate") or ""
    try:
        g = lookup_gpu(re.split(r"[ (]", name.replace("NVIDIA ", ""))[0] if name else None, total)
        return g
    except OomguardError:
        if total:
            return lookup_gpu(None, total)
    return None


def _flags(r: dict) -> dict:
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
    return f


def _quant_flag(r: dict, model) -> str | None:
    """Records whose checkpoint was quantized differently from the bundled config (config_note)."""
    q = str(r.get("quantization") or "").lower()
    if not q or model.quantization.is_quantized:
        return None
    for key, flag in (("nvfp4", "modelopt_fp4"), ("gptq", "gptq"), ("awq", "awq"), ("fp8", "fp8"), ("bitsandbytes", "bitsandbytes")):
        if key in q:
            return flag
    return None


def pct(pred: float, real: float) -> float:
    return abs(pred - real) / abs(real) * 100 if real else float("inf")


def evaluate(verbose: bool = False) -> dict:
    rows, skipped = [], []
    for line in DATA.read_text().splitlines():
        r = json.loads(line)
        rid = r["id"]
        if not r.get("config") or not (CATALOG_DIR / r["config"]).is_dir():
            skipped.append((rid, "no model config"))
            continue
        gpu = _gpu(r)
        if gpu is None:
            skipped.append((rid, "GPU total unknown"))
            continue
        try:
            model = load_model(str(CATALOG_DIR / r["config"]))
        except OomguardError as exc:
            skipped.append((rid, f"model not modelled: {str(exc).split(': ', 1)[-1][:70]}"))
            continue
        if r.get("tp") is None and (r.get("num_gpus") or 1) > 1:
            skipped.append((rid, "parallel layout not stated"))
            continue
        if _version(r) is None:
            skipped.append((rid, "vLLM version not stated (defaults and accounting differ by release)"))
            continue
        flags = _flags(r)
        qflag = _quant_flag(r, model)
        if qflag:
            flags["quantization"] = qflag
        env = {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}
        version = _version(r)
        if "V0" in str(r.get("engine", "")) and version and version >= "0.8":
            env["VLLM_USE_V1"] = "0"
        try:
            plan = plan_launch(model, gpu, flags, env, version=version, num_gpus=64)
        except OomguardError as exc:
            skipped.append((rid, f"plan error: {exc}"))
            continue
        rank = plan.tight_rank
        logged_w = r.get("weights_gib") or r.get("weights_gb_as_logged")
        row = {"id": rid, "config": r["config"], "version": version, "gpu": gpu.name, "tp": flags.get("tensor_parallel_size", 1)}
        if logged_w:
            row["weights"] = (rank.weights.bytes / GiB, float(logged_w))
        act = r.get("activation_peak_gib")
        if act is not None and not (r.get("extra") or {}).get("activation_note"):
            row["activation"] = (rank.activation.bytes / GiB, float(act))
        if r.get("kv_cache_gib") is not None:
            row["kv_gib"] = (rank.kv_bytes / GiB, float(r["kv_cache_gib"]))
            # tokens from the logged KV GiB
            lay = rank.layout
            if lay.bytes_per_block and r.get("kv_cache_tokens"):
                lo_b = int((float(r["kv_cache_gib"]) - 0.005) * GiB) // lay.bytes_per_block
                hi_b = int((float(r["kv_cache_gib"]) + 0.005) * GiB) // lay.bytes_per_block
                L = plan.settings.max_model_len
                bpr = plan.blocks_per_request
                cand = set()
                for nb in range(lo_b, hi_b + 1):
                    if tokens_logged_by_groups(plan.settings, lay.num_groups):
                        cand.add((nb // lay.num_groups) * plan.block_size)
                    else:
                        cand.add(int(nb / bpr * L))
                row["tokens_from_logged_kv"] = (min(cand), max(cand), int(r["kv_cache_tokens"]))
        if r.get("kv_cache_tokens"):
            row["tokens"] = (plan.kv_cache_tokens, int(r["kv_cache_tokens"]))
        if r.get("max_concurrency") and r.get("concurrency_for_len") in (None, plan.settings.max_model_len):
            row["concurrency"] = (plan.max_concurrency, float(r["max_concurrency"]))
        if len(row) > 5:
            rows.append(row)
        else:
            skipped.append((rid, "no logged memory figure to compare"))
    summary = {}
    for key in ("weights", "activation", "kv_gib", "tokens", "concurrency"):
        errs = [pct(*row[key]) for row in rows if key in row]
        if errs:
            summary[key] = {
                "n": len(errs),
                "median_pct": round(statistics.median(errs), 2),
                "worst_pct": round(max(errs), 2),
                "within_5pct": sum(e <= 5 for e in errs),
            }
    tok = [row["tokens_from_logged_kv"] for row in rows if "tokens_from_logged_kv" in row]
    summary["tokens_from_logged_kv"] = {"n": len(tok), "exact_to_rounding": sum(lo <= real <= hi for lo, hi, real in tok)}
    return {"rows": rows, "skipped": skipped, "summary": summary}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    res = evaluate(a.verbose)
    if a.json:
        print(json.dumps(res, indent=1, default=str))
        return 0
    fmt = lambda p: f"{p[0]:.2f}/{p[1]:.2f}" if isinstance(p[0], float) else f"{p[0]}/{p[1]}"
    print(f"{'id':6} {'config':40} {'ver':7} {'gpu':15} tp  weights(pred/log)  act          kv GiB         tokens              conc")
    for row in res["rows"]:
        cells = [fmt(row[k]) if k in row else "-" for k in ("weights", "activation", "kv_gib", "tokens", "concurrency")]
        print(f"{row['id']:6} {row['config'][:40]:40} {str(row['version']):7} {row['gpu'][:15]:15} {row['tp']:<3} {cells[0]:18} {cells[1]:12} {cells[2]:14} {cells[3]:19} {cells[4]}")
    print("\nsummary (absolute % error):")
    for k, v in res["summary"].items():
        print(f"  {k:22} {v}")
    print(f"\nnot modelled ({len(res['skipped'])}):")
    for rid, why in res["skipped"]:
        print(f"  {rid}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
