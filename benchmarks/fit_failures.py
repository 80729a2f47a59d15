"""``fit --from`` on the real memory failures of tests/data/calibration/failures.jsonl.

For every record whose class is a GPU memory failure and whose model (bundled
catalog, offline), GPU (catalog) and command are known, rebuild the launch
from the record's command, run ``fit`` with it as ``--from``, and print the
proposed edit next to the fix the thread concluded (``fix``), whether the
memory model predicts the proposal starts, and whether it predicted the
original launch to fail.

    python benchmarks/fit_failures.py [--json] [--verbose]
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from oomguard.errors import OomguardError  # noqa: E402
from oomguard.fit.runner import FitRequest, fit  # noqa: E402
from oomguard.fit.space import Goal  # noqa: E402
from oomguard.inputs.hardware import lookup_gpu  # noqa: E402
from oomguard.inputs.command import parse_command, parse_flags  # noqa: E402
from oomguard.inputs.launch import Launch  # noqa: E402
from oomguard.inputs.model_config import catalog_ids, load_model  # noqa: E402
from oomguard.units import GiB  # noqa: E402

DATA = ROOT / "tests" / "data" / "calibration" / "failures.jsonl"
# GPU memory failures fit can act on; host-oom belongs to `oomguard host`.
MEMORY_CLASSES = {"weights-oom", "startup-free-memory", "profile-oom", "cudagraph-oom", "no-kv-memory", "kv-too-small", "runtime-oom", "mamba-state-limit"}


def resolve_model(text: str | None):
    if not text:
        return None, "model unknown"
    words = re.sub(r"\(.*?\)", "", text).split()
    if not words:
        return None, "model unknown"
    name = words[0]
    try:
        return load_model(name, allow_hub=False), None
    except OomguardError:
        pass
    # "Llama-3.1-8B" names meta-llama/Meta-Llama-3.1-8B: accept a unique catalog id that ends with the name
    tail = name.split("/")[-1].lower()
    hits = [c for c in catalog_ids() if c.split("/")[-1].lower().endswith(tail) and len(tail) >= 8]
    if len(hits) == 1:
        return load_model(hits[0], allow_hub=False), None
    return None, f"model {name!r} not in the bundled catalog"


def resolve_gpu(text: str | None):
    """(GPU, count, GiB held by others) from strings like '4x RTX 3090 (TP4)' or 'RTX 3090 24GB (1.67 GiB held by other tenants)'."""
    if not text:
        return None, 1, 0.0, "GPU unknown"
    count = 1
    m = re.match(r"^\s*(\d+)\s*x\s*", text)
    if m:
        count = int(m.group(1))
        text = text[m.end():]
    other = 0.0
    m = re.search(r"([\d.]+)\s*GiB held by other", text)
    if m:
        other = float(m.group(1))
    clean = re.sub(r"\(.*?\)", "", text).replace("NVIDIA", "").strip()
    words = clean.split()
    for n in range(len(words), 0, -1):
        try:
            return lookup_gpu(" ".join(words[:n])), count, other, None
        except OomguardError:
            continue
    return None, count, other, f"GPU {text!r} not in the catalog"


def resolve_version(r: dict) -> tuple[str | None, dict]:
    text = str(r.get("version") or "")
    env = {}
    if "(V0)" in text:
        env["VLLM_USE_V1"] = "0"
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if m and m.group(1) == "0":
        return f"0.{m.group(2)}.{m.group(3) or 0}", env
    if "# GPU blocks" in (r.get("log_excerpt") or ""):
        return "0.6.6", env  # the V0 log format
    return None, env


def build_launch(r: dict, model_name: str, version: str | None) -> tuple[Launch | None, str | None]:
    """The record's command as a Launch: a real command line, a JSON dict of flags, or flags quoted in prose."""
    cmd = (r.get("command") or "").strip()
    if not cmd:
        return None, "command unknown"
    if cmd.startswith("{"):
        try:
            d = json.loads(cmd)
        except ValueError:
            d = None
        if isinstance(d, dict):
            flags = {k: v for k, v in d.items() if k not in ("model", "dtype") and v is not None}
            return Launch("flags", None, model_name, flags=flags), None
    if re.search(r"(^|\s)(vllm serve|-m vllm\.entrypoints)", cmd):
        try:
            launch = parse_command(shlex.split(cmd.replace("...", "")), version=version, lenient=True)
            launch.model = launch.model or model_name
            return launch, None
        except (OomguardError, ValueError):
            pass
    # Prose: pick out --flag value pairs, and "gpu_memory_utilization 0.90" / "util 0.92" mentions.
    words = []
    for m in re.finditer(r"--([a-z][a-z0-9_-]*)(?:[ =]([^\s(),]+))?", cmd):
        words.append("--" + m.group(1).replace("_", "-"))
        if m.group(2) and not m.group(2).startswith("-"):
            words.append(m.group(2))
    m = re.search(r"(?:gpu_memory_utilization|util)\s*=?\s*([01]?\.\d+)", cmd)
    if m and "--gpu-memory-utilization" not in words:
        words += ["--gpu-memory-utilization", m.group(1)]
    m = re.search(r"(?<!-)max_model_len\s*=?\s*(\d+)", cmd)
    if m and "--max-model-len" not in words:
        words += ["--max-model-len", m.group(1)]
    if not words:
        return Launch("flags", None, model_name, flags={}), "no flags in the command (defaults assumed)"
    try:
        launch = parse_flags(words, version=version, lenient=True)
    except OomguardError as exc:
        return None, f"flags not readable: {exc}"
    launch.model = model_name
    return launch, None


def evaluate() -> dict:
    rows, skipped = [], []
    for line in DATA.read_text().splitlines():
        r = json.loads(line)
        rid, cls = r["id"], r.get("class")
        if cls not in MEMORY_CLASSES:
            continue
        model, why = resolve_model(r.get("model"))
        if model is None:
            skipped.append((rid, cls, why))
            continue
        gpu, count, other, why = resolve_gpu(r.get("gpu"))
        if gpu is None:
            skipped.append((rid, cls, why))
            continue
        version, env = resolve_version(r)
        launch, note = build_launch(r, r["model"].split()[0], version)
        if launch is None:
            skipped.append((rid, cls, note))
            continue
        launch.env.update(env)
        f = launch.flags
        world = int(f.get("tensor_parallel_size") or 1) * int(f.get("pipeline_parallel_size") or 1)
        req = FitRequest(model, gpu, max(count, world), Goal(), version=version, launch=launch, model_name=launch.model, other_gpu_use_bytes=int(other * GiB), top=1)
        try:
            res = fit(req)
        except OomguardError as exc:
            skipped.append((rid, cls, f"fit error: {exc}"))
            continue
        lp = res.launch_plan
        best = res.candidates[0] if res.candidates else None
        rows.append(
            {
                "id": rid,
                "class": cls,
                "model": r["model"],
                "gpu": f"{count}x {gpu.name}" + (f" ({other:g} GiB used by others)" if other else ""),
                "version": version or "newest",
                "command_note": note,
                "launch_predicted": "starts" if lp.starts else lp.failure.value,
                "agrees": (not lp.starts),
                "edit": [c.describe() for c in best.edit] if best else None,
                "proposal_starts": bool(best and best.plan.starts),
                "command": best.command if best else None,
                "fix": r.get("fix"),
                "searched": res.searched,
            }
        )
    n = len(rows)
    summary = {
        "memory_records": n + len(skipped),
        "evaluated": n,
        "skipped": len(skipped),
        "proposal_predicted_to_start": sum(x["proposal_starts"] for x in rows),
        "launch_predicted_to_fail": sum(x["agrees"] for x in rows),
    }
    return {"rows": rows, "skipped": skipped, "summary": summary}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--verbose", action="store_true", help="print the full proposed command")
    a = ap.parse_args()
    res = evaluate()
    if a.json:
        print(json.dumps(res, indent=1, default=str))
        return 0
    for x in res["rows"]:
        print(f"{x['id']}  {x['class']}  {x['model']}  on {x['gpu']}  (vLLM {x['version']})")
        print(f"   launch as written: {'predicted to start' if x['launch_predicted'] == 'starts' else 'predicted ' + x['launch_predicted']}"
              + (f"   [{x['command_note']}]" if x["command_note"] else ""))
        edit = "; ".join(x["edit"]) if x["edit"] else ("no edit needed" if x["edit"] == [] else "NO LAUNCH FITS")
        print(f"   fit proposes:      {edit}  -> {'predicted to start' if x['proposal_starts'] else 'nothing starts'}")
        print(f"   thread's fix:      {x['fix']}")
        if a.verbose and x["command"]:
            print(f"   command:           {x['command']}")
    s = res["summary"]
    print(
        f"\n{s['evaluated']} of {s['memory_records']} GPU-memory records evaluated; proposal predicted to start: "
        f"{s['proposal_predicted_to_start']}/{s['evaluated']}; original launch predicted to fail: {s['launch_predicted_to_fail']}/{s['evaluated']}"
    )
    print(f"skipped ({len(res['skipped'])}):")
    for rid, cls, why in res["skipped"]:
        print(f"   {rid} {cls}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
