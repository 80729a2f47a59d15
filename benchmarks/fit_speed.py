"""How fast ``oomguard fit`` evaluates candidate launches (target: >= 10,000 per second).

Three figures per case:

- ``evaluate/s``: the fast evaluator alone (oomguard.fit.search.evaluate) on
  one base and step, varying gpu-memory-utilization and max-model-len;
- ``search/s``: the whole sweep (bases planned with plan_launch, steps from the
  activation model, every candidate evaluated and checked against the goal),
  candidates per second of wall time;
- ``fit``: the full answer (search + ranking + the full plan_launch and
  trade-offs of the shown candidates), in milliseconds.

plus ``plan_launch/s`` for reference (the slow path the evaluator replaces).

    python benchmarks/fit_speed.py [--repeat N] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from oomguard.fit.runner import FitRequest, _Search, fit  # noqa: E402
from oomguard.fit.search import evaluate, make_base, make_step  # noqa: E402
from oomguard.fit.space import Goal, Objective  # noqa: E402
from oomguard.inputs.hardware import lookup_gpu  # noqa: E402
from oomguard.inputs.reader import read_launch  # noqa: E402
from oomguard.inputs.model_config import load_model  # noqa: E402
from oomguard.model.planner import plan_launch  # noqa: E402
from oomguard.units import GiB  # noqa: E402

SCEN = ROOT / "tests" / "scenarios"


def cases():
    yield "S1 --from (1M, A100)", lambda: FitRequest(load_model(str(SCEN / "s1" / "model")), lookup_gpu("A100-80GB"), 1, Goal(), launch=read_launch(SCEN / "s1" / "start_api.sh"))
    yield "S2 latency (13B, 8x3090)", lambda: FitRequest(
        load_model("meta-llama/Llama-2-13b-chat-hf"), lookup_gpu("RTX-3090"), 8, Goal(context=8192, objective=Objective.LATENCY)
    )
    yield "S3 --from (750K, 4x4090)", lambda: FitRequest(
        load_model(str(SCEN / "s3" / "model")), lookup_gpu("RTX-4090"), 4, Goal(host_ram_bytes=256 * GiB), launch=read_launch(SCEN / "s3" / "start_api.sh", lenient=True)
    )
    yield "Qwen3-30B-A3B max-context 2xH100", lambda: FitRequest(
        load_model("Qwen/Qwen3-30B-A3B-Instruct-2507"), lookup_gpu("H100"), 2, Goal(max_context=True, objective=Objective.MAX_CONTEXT)
    )
    yield "Qwen3.5-9B (hybrid) 8x8K 1x4090", lambda: FitRequest(
        load_model("Qwen/Qwen3.5-9B"), lookup_gpu("RTX-4090"), 1, Goal(context=32768, concurrency=8, avg_input_len=8192)
    )


def bench_evaluate(n: int = 200_000) -> float:
    m, g = load_model("Qwen/Qwen2.5-7B-Instruct"), lookup_gpu("A100-80GB")
    flags = {"max_num_batched_tokens": 2048, "max_num_seqs": 64, "max_model_len": 32768}
    base = make_base(m, g, flags, {}, version=None, num_gpus=1)
    step = make_step(m, g, flags, {}, version=None, token_budget=2048, num_seqs=64)
    utils = [0.8, 0.85, 0.9, 0.92, 0.95]
    lens = [4096, 8192, 16384, 32768]
    t = time.perf_counter()
    i = 0
    while i < n:
        for u in utils:
            for L in lens:
                evaluate(base, step, u, L)
        i += len(utils) * len(lens)
    return i / (time.perf_counter() - t)


def bench_plan(n: int = 2000) -> float:
    m, g = load_model("Qwen/Qwen2.5-7B-Instruct"), lookup_gpu("A100-80GB")
    t = time.perf_counter()
    for i in range(n):
        plan_launch(m, g, {"max_num_batched_tokens": 2048, "max_num_seqs": 64, "max_model_len": 32768, "gpu_memory_utilization": 0.8 + (i % 10) / 100}, {})
    return n / (time.perf_counter() - t)


def bench_case(make, repeat: int) -> dict:
    searched, search_s, fit_s = [], [], []
    for _ in range(repeat):
        req = make()
        gc.disable()
        try:
            s = _Search(req)
            fixed, cap, _ = s._length_goal()  # noqa: SLF001
            t = time.perf_counter()
            s.search(fixed, cap, req.goal.concurrency)
            search_s.append(time.perf_counter() - t)
            searched.append(s.searched)
        finally:
            gc.enable()
        req = make()
        t = time.perf_counter()
        r = fit(req)
        fit_s.append(time.perf_counter() - t)
    best = min(range(repeat), key=lambda i: search_s[i])
    return {
        "searched": searched[best],
        "search_s": search_s[best],
        "search_per_s": searched[best] / search_s[best],
        "fit_ms": statistics.median(fit_s) * 1000,
        "fit_searched": r.searched,
        "found": r.found,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    out = {"evaluate_per_s": bench_evaluate(), "plan_launch_per_s": bench_plan(), "cases": {}}
    for name, make in cases():
        out["cases"][name] = bench_case(make, a.repeat)
    if a.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"fast evaluator:  {out['evaluate_per_s']:>12,.0f} candidates/s  (evaluate() alone)")
    print(f"plan_launch:     {out['plan_launch_per_s']:>12,.0f} plans/s       (the full ledger, for reference)")
    print()
    print(f"{'case':36} {'searched':>9} {'search ms':>10} {'search/s':>10} {'fit ms':>8}  found")
    for name, c in out["cases"].items():
        print(f"{name:36} {c['searched']:>9,} {c['search_s'] * 1000:>10.0f} {c['search_per_s']:>10,.0f} {c['fit_ms']:>8.0f}  {c['found']}")
    worst = min(c["search_per_s"] for c in out["cases"].values())
    print(f"\nslowest end-to-end search: {worst:,.0f} candidates/s (target >= 10,000)")
    return 0 if worst >= 10_000 else 1


if __name__ == "__main__":
    sys.exit(main())
