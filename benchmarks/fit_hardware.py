"""fit without a GPU on the three founding scenarios: what oomguard would buy, against what the teams ran.

For each scenario (/work/shared/scenarios.md, inputs in tests/scenarios/) the goal is the one the team
stated, and the search covers every card of the bundled price table (src/oomguard/data/prices.yaml):

- S1: one 1,048,576-token request (Qwen2.5-7B-1M layout); the team ran 1 x A100 80 GB;
- S2: CodeLlama-13B at 8,192 tokens, 8 concurrent long requests (their load test); the team ran 8 x RTX 3090;
- S3: one 750,000-token request on a 27B W4A16 model; the team ran 4 x RTX 4090 with a CPU KV tier
  (the GPUs held 327,680 tokens); also the load they sized for: 10 requests of 32K.

Printed per scenario: the cheapest launch that fits, the most tokens per dollar, the lowest latency,
and where the team's own hardware stands (does it fit the goal on the GPUs alone; its cost per hour
at the table's prices; the smallest count of that card that fits). Speeds are fit's roofline
estimates (±50 %); prices are the table's dated rows.

    python benchmarks/fit_hardware.py [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from oomguard.fit import prices as price_table  # noqa: E402
from oomguard.fit.hardware import search  # noqa: E402
from oomguard.fit.space import Goal  # noqa: E402
from oomguard.inputs.hardware import lookup_gpu  # noqa: E402
from oomguard.inputs.model_config import load_model  # noqa: E402

SCEN = ROOT / "tests" / "scenarios"
# S3's own RoPE recipe (its start_api.sh): the model reaches 750,000 positions only with it
S3_ROPE = {"hf_overrides": {"rope_scaling": {"rope_type": "yarn", "factor": 3.0, "original_max_position_embeddings": 262144}}}
CASES = (
    ("S1", str(SCEN / "s1" / "model"), Goal(context=1_048_576, concurrency=1), "A100-SXM4-80GB", 1, None),
    ("S2", "codellama/CodeLlama-13b-Instruct-hf", Goal(context=8192, concurrency=8), "RTX-3090", 8, None),
    ("S3", str(SCEN / "s3" / "model"), Goal(context=750_000, concurrency=1), "RTX-4090", 4, S3_ROPE),
    ("S3 (10 x 32K)", str(SCEN / "s3" / "model"), Goal(context=750_000, concurrency=10, avg_input_len=32768), "RTX-4090", 4, S3_ROPE),
)


def _brief(o) -> dict | None:
    if o is None:
        return None
    return {"hardware": o.label(), "cost_per_hour": o.cost_per_hour, "tokens_per_s": round(o.tokens_per_s),
            "tokens_per_dollar": None if o.tokens_per_dollar is None else round(o.tokens_per_dollar),
            "ttft_s": round(o.ttft_s, 2), "itl_ms": round(o.itl_s * 1000), "command": o.candidate.command}


def run_case(name, model_spec, goal, team_gpu, team_count, fixed, prices) -> dict:
    model = load_model(model_spec)
    gpus = [lookup_gpu(n) for n in prices.rows]
    t0 = time.perf_counter()
    res = search(model, goal, gpus=gpus, prices=prices, fixed_flags=fixed,
                 model_name=Path(model_spec).name if "/" in model_spec and Path(model_spec).exists() else model_spec)
    elapsed = time.perf_counter() - t0
    team = lookup_gpu(team_gpu)
    own = [o for o in res.options if o.gpu.name == team.name]
    team_fits = any(o.count == team_count for o in own)
    price = prices.price_of(team.name)
    return {
        "scenario": name,
        "goal": {"max_model_len": goal.context, "concurrency": goal.concurrency, "avg_input_len": goal.avg_input_len},
        "team": {"hardware": f"{team_count}x {team.name}", "cost_per_hour": round(price.usd_per_gpu_hour * team_count, 2) if price else None,
                 "fits_on_gpus": team_fits, "smallest_count_of_that_card": min((o.count for o in own), default=None)},
        "cheapest": _brief(res.cheapest),
        "best_tokens_per_dollar": _brief(res.best_tokens_per_dollar),
        "best_latency": _brief(res.best_latency),
        "fitting_launches": len(res.options),
        "elapsed_s": round(elapsed, 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    prices = price_table.load()
    rows = [run_case(*c, prices) for c in CASES]
    if a.json:
        print(json.dumps(rows, indent=1))
        return 0
    print("# fit without a GPU on the founding scenarios (bundled prices, roofline speeds ±50 %)\n")
    print("| scenario | team ran | fits on its GPUs? | cheapest that fits | most tokens/$ | lowest latency |")
    print("|---|---|---|---|---|---|")

    def cell(b):
        if b is None:
            return "nothing fits"
        return f"{b['hardware']} ${b['cost_per_hour']}/h, {b['tokens_per_s']} tok/s, TTFT {b['ttft_s']} s"

    for r in rows:
        t = r["team"]
        fits = "yes" if t["fits_on_gpus"] else (f"no (smallest that fits: {t['smallest_count_of_that_card']}x)" if t["smallest_count_of_that_card"]
                                                else "no (no count of that card fits)")
        print(f"| {r['scenario']} | {t['hardware']} (${t['cost_per_hour']}/h) | {fits} | {cell(r['cheapest'])} | "
              f"{cell(r['best_tokens_per_dollar'])} | {cell(r['best_latency'])} |")
    print()
    for r in rows:
        print(f"- {r['scenario']}: {r['fitting_launches']} launches fit; searched in {r['elapsed_s']} s; cheapest: `{(r['cheapest'] or {}).get('command')}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
