"""The shared-GPU planner on public two-server start-ups: predicted vs what happened.

Every case of tests/fixtures/shared-gpu/reports/cases.yaml (a public thread, its URL and quote, the
launches in start order, the GPU and release) is planned through the real CLI
(`oomguard plan FIRST --same-gpu SECOND ... --format json`), and each server's predicted verdict is
printed beside the reported one, with the numbers the thread states where it states any.

    python benchmarks/shared_gpu_reports.py
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "fixtures" / "shared-gpu" / "reports"


def plan_case(case: dict) -> dict:
    """The CLI's JSON for one case: a shared plan for several launches, a single plan for one."""
    files = [str(CASES / f) for f in case["launches"]]
    cmd = [sys.executable, "-m", "oomguard.cli.main", "plan", files[0]]
    for f in files[1:]:
        cmd += ["--same-gpu", f]
    cmd += ["--gpu", case["gpu"], "--vllm-version", str(case["vllm_version"]), "--format", "json"]
    if case.get("other_gpu_use_gib"):
        cmd += ["--other-gpu-use-gib", str(case["other_gpu_use_gib"])]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=str(ROOT), timeout=300)
    if out.returncode not in (0, 1):
        raise SystemExit(f"{case['id']}: oomguard plan exited {out.returncode}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def verdicts(d: dict) -> list[dict]:
    """Per server in start order: verdict ("starts" or the failure class) and the figures behind it."""
    if "shared_gpu" in d:
        (sp,) = d["shared_gpu"]
        return [{"verdict": "starts" if s["starts"] else s["failure"], "kv_gib": s["kv_cache_gib"],
                 "others_gib": s["others_at_start_gib"], "free_gib": s["free_at_start_gib"],
                 "requested_gib": s["requested_gib"], "footprint_gib": s["footprint_gib"], "error": s["error"]}
                for s in sp["servers"]]
    pg = d["per_gpu"][0] if isinstance(d.get("per_gpu"), list) else d["per_gpu"]
    return [{"verdict": "starts" if d["starts"] else d["failure"], "kv_gib": pg.get("kv_cache_gib"),
             "requested_gib": pg.get("requested_gib"), "error": d.get("error")}]


def main() -> int:
    cases = yaml.safe_load((CASES / "cases.yaml").read_text())["cases"]
    rows, right, total = [], 0, 0
    for case in cases:
        got = verdicts(plan_case(case))
        for i, (want, g) in enumerate(zip(case["reported"], got), 1):
            ok = want == g["verdict"]
            right += ok
            total += 1
            rows.append((case["id"], i, case["launches"][i - 1], want, g["verdict"], g.get("kv_gib"), ok))
        case["_got"] = got
    print("# Shared-GPU planner on public two-server start-ups (tests/fixtures/shared-gpu/reports/cases.yaml)\n")
    print("| case | # | launch | reported | predicted | predicted KV pool GiB | match |")
    print("|---|---|---|---|---|---|---|")
    for cid, i, f, want, got, kv, ok in rows:
        print(f"| {cid} | {i} | {f} | {want} | {got} | {kv if kv is not None else '-'} | {'yes' if ok else 'NO'} |")
    print(f"\n{right} of {total} server verdicts match what the threads report.\n")
    print("Numbers the threads state, against the plan:")
    for case in cases:
        n, got = case.get("numbers") or {}, case["_got"]
        if "second_initial_usage_gib" in n:
            # 0.6.4 reads initial_memory_usage after its own weights load: the servers before it + its weights
            m = re.search(r"weights ([0-9.]+)", got[1]["error"] or "")
            own = float(m.group(1)) if m else 0.0
            print(f"- {case['id']}: second server's initial_memory_usage logged {n['second_initial_usage_gib']} GiB; "
                  f"predicted {got[1]['others_gib'] + own:.2f} GiB (the first server's footprint {got[1]['others_gib']} "
                  f"+ the second's weights {own})")
        if "first_used_gib" in n:
            print(f"- {case['id']}: nvidia-smi with the first server up {n['first_used_gib']} GiB; "
                  f"predicted footprint {got[0]['footprint_gib']} GiB (its KV pool {got[0]['kv_gib']} GiB)")
        if "free_at_start_gib" in n:
            print(f"- {case['id']}: logged free at start {n['free_at_start_gib']} GiB, requested {n['requested_gib']} GiB; "
                  f"predicted: {got[0]['error']}")
    print("\nVersions: " + "; ".join(f"{c['id']}: {c['vllm_version']} ({c['version_note']})" for c in cases if c.get("version_note")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
