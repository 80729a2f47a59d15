"""Plan everywhere: every bundled catalog entry and every config under tests/ through the real CLI.

Issue 18's first measure: "every popular public config gets a plan (native or generic), never a
bare refusal". For each config this runs ``oomguard plan --model X --gpu G
--tensor-parallel-size N --format json`` in a subprocess (what a user runs) on a sensible GPU
set (H100 × the smallest power-of-two TP that holds the weights with room for a KV cache, up to
8; B200 × 8 beyond), and counts the plan's coverage level: native-exact / native / generic, or
refused (exit 3 / no plan) with the reason. A plan that says the launch does not fit (exit 1)
is still a plan.

    python benchmarks/plan_everywhere.py [--json] [--extra DIR ...]

``--extra DIR``: more model directories or config.json files to plan (e.g. the team's shared
calibration configs, ``--extra ../shared/calibration/configs``); the default set is the catalog
plus every config.json under tests/ (the oracle configs, scenarios, fixtures, calibration).
Nothing here is a pass/fail target; the output is a measurement to quote.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OOMGUARD = [sys.executable, "-m", "oomguard.cli.main"]
# Room left for the KV cache and the activation peak when choosing the TP size: weights per
# H100 (79.2 GiB logged) at most this much.
MAX_WEIGHTS_PER_GPU_GIB = 60.0


def _cli() -> list[str]:
    exe = Path(sys.executable).with_name("oomguard")
    return [str(exe)] if exe.exists() else OOMGUARD


def _run(args: list[str]) -> tuple[int, str, str]:
    p = subprocess.run(_cli() + args, capture_output=True, text=True, cwd=ROOT, timeout=300)
    return p.returncode, p.stdout, p.stderr


def catalog() -> list[dict]:
    rc, out, err = _run(["models", "--json"])
    if rc != 0:
        raise SystemExit(f"oomguard models failed ({rc}): {err.strip()}")
    return json.loads(out)["catalog"]


def test_configs() -> list[Path]:
    out = []
    for p in sorted((ROOT / "tests").rglob("config.json")):
        try:
            cfg = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(cfg, dict) and ("model_type" in cfg or "architectures" in cfg):
            out.append(p.parent)
    return out


def extra_configs(dirs: list[str]) -> list[Path]:
    out = []
    for d in dirs:
        base = Path(d)
        if base.is_file():
            out.append(base.parent)
            continue
        out += sorted(p.parent for p in base.rglob("config.json"))
    return out


def gpu_for(weights_gib: float | None) -> tuple[str, int]:
    w = float(weights_gib or 0)
    for tp in (1, 2, 4, 8):
        if w / tp <= MAX_WEIGHTS_PER_GPU_GIB:
            return "H100", tp
    return "B200", 8


def plan_one(model: str, weights_gib: float | None) -> dict:
    gpu, tp = gpu_for(weights_gib)
    rc, out, err = _run(["plan", "--model", model, "--gpu", gpu, "--tensor-parallel-size", str(tp), "--format", "json"])
    row = {"model": model, "gpu": f"{tp}× {gpu}", "rc": rc}
    try:
        plan = json.loads(out) if out.strip() else None
    except ValueError:
        plan = None
    if plan and isinstance(plan.get("coverage"), dict) and rc in (0, 1):
        row["level"] = plan["coverage"].get("level") or "?"
        row["model_type"] = plan["coverage"].get("model_type")
        row["starts"] = plan.get("starts")
        return row
    if plan and rc == 2 and tp > 1 and "tensor" in (json.dumps(plan.get("error")) + err).lower():
        # a TP size the model's heads cannot split: plan it on one larger card instead
        rc, out, err = _run(["plan", "--model", model, "--gpu", "B200", "--format", "json"])
        row.update(gpu="1× B200", rc=rc)
        plan = json.loads(out) if out.strip().startswith("{") else None
        if plan and isinstance(plan.get("coverage"), dict) and rc in (0, 1):
            row.update(level=plan["coverage"].get("level") or "?", model_type=plan["coverage"].get("model_type"),
                       starts=plan.get("starts"))
            return row
    row["level"] = "refused"
    msg = (plan or {}).get("error") if plan else None
    row["why"] = (json.dumps(msg) if msg else (err.strip().splitlines() or ["(no output)"])[-1])[:300]
    return row


def weights_of(model_dir: Path) -> float | None:
    """The weights a first plan on one B200 reports (to choose the TP size for the real one)."""
    rc, out, _ = _run(["plan", "--model", str(model_dir), "--gpu", "B200", "--tensor-parallel-size", "1", "--format", "json"])
    try:
        plan = json.loads(out)
        per = plan["per_gpu"]
        return float((per[0] if isinstance(per, list) else per)["weights_gib"])
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--extra", action="append", default=[], help="more model dirs / config.json files (recursively)")
    args = ap.parse_args()
    rows = []
    for entry in catalog():
        r = plan_one(entry["id"], entry.get("weights_gib"))
        r["set"] = "catalog"
        rows.append(r)
    for d in test_configs():
        r = plan_one(str(d.relative_to(ROOT)), weights_of(d))
        r["set"] = "tests"
        rows.append(r)
    for d in extra_configs(args.extra):
        r = plan_one(str(d), weights_of(d))
        r["set"] = "extra"
        rows.append(r)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    for name in ("catalog", "tests", "extra"):
        sub = [r for r in rows if r["set"] == name]
        if not sub:
            continue
        c = Counter(r["level"] for r in sub)
        print(f"{name}: {len(sub)} configs — " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
        for r in sub:
            if r["level"] == "refused":
                print(f"  refused  {r['model']} on {r['gpu']} (exit {r['rc']}): {r['why']}")
    c = Counter(r["level"] for r in rows)
    print(f"all: {len(rows)} — " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
