"""Calibration of ``oomguard check`` against real failed and successful vLLM launches.

Two measurements over tests/data/calibration/:

- detection rate: for each record of failures.jsonl whose command, model and GPU
  are known and whose class is a memory or argument failure, ``oomguard check``
  must report an *error* whose rule foretells that class (``Rule.predicts``);
- false-alarm rate: for each successful start-up of startup.jsonl with a known
  command (and a model config and GPU, so that the memory rules run), check must
  report no error at all.

Records give commands as fragments ("--max-model-len 29000 (gpu_memory_utilization
0.90)", "util 0.92 --enforce-eager"): the launch is rebuilt leniently from the
flag-like parts. The model comes from the record's ``config`` (or its ``model``
when it names a catalog entry exactly), the GPU from ``lookup_gpu`` (with
``gpu_total_mem_gib`` when present). The vLLM version is the record's
(``version`` / ``vllm_version`` or the estimate); when absent, a V0 log format
("# GPU blocks") selects 0.6.6 (0.7.0 for the "the current vLLM instance can use" profiling summary
of vllm PR #12126), otherwise the newest release is assumed.

    python benchmarks/check_calibration.py [--verbose] [--json]
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

from oomguard.check.context import CheckOptions  # noqa: E402
from oomguard.check.registry import get_rule  # noqa: E402
from oomguard.check.report import check_target  # noqa: E402
from oomguard.errors import OomguardError  # noqa: E402
from oomguard.inputs.hardware import lookup_gpu  # noqa: E402
from oomguard.inputs.model_config import CATALOG_DIR as _CATALOG  # noqa: E402

CATALOG_DIR = Path(_CATALOG)

DATA = ROOT / "tests" / "data" / "calibration"
MEMORY_OR_ARGUMENT = {
    "weights-oom", "startup-free-memory", "profile-oom", "cudagraph-oom", "no-kv-memory", "kv-too-small",
    "runtime-oom", "host-oom", "bad-argument", "max-len-exceeds-model", "config-error", "mamba-state-limit",
}
# fragment spellings of flags in prose ("util 0.92", "gpu_memory_utilization=0.95")
_PROSE_FLAGS = {
    "util": "--gpu-memory-utilization",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "max_model_len": "--max-model-len",
    "max-model-len": "--max-model-len",
    "max_num_seqs": "--max-num-seqs",
    "tensor_parallel_size": "--tensor-parallel-size",
}


def version_of(r: dict, *keys: str) -> tuple[str | None, str]:
    """(version, how it was chosen); None = newest. A stated version wins, then the log's own
    format (the V0 profiling summary vllm PR #12126 introduced, first released in 0.7.0), then
    an estimate."""
    log = str(r.get("log_excerpt") or "") + str(r.get("raw_excerpt") or "")
    for i, k in enumerate(keys):
        if i and "the current vLLM instance can use total_gpu_memory" in log:
            return "0.7.0", "V0 profiling summary of 0.7"
        text = str(r.get(k) or "")
        m = re.search(r"(?<![\d.])0\.(\d+)(?:\.(\d+))?(?:\.post(\d+))?", text)
        if m:
            v = f"0.{m.group(1)}.{m.group(2) or 0}" + (f".post{m.group(3)}" if m.group(3) else "")
            return v, k
    if "# GPU blocks" in log or str(r.get("engine") or "").startswith("V0"):
        return "0.6.6.post1", "V0 log format"
    return None, "newest (no version given)"


def catalog_config(r: dict) -> str | None:
    """A catalog folder for the record's model: its ``config`` field, or an exact name match."""
    return catalog_match(r)[0]


def catalog_match(r: dict) -> tuple[str | None, list[str]]:
    """(catalog folder, flags to inject): an ``-FP8`` re-upload of a catalog model is that model
    with ``--quantization fp8`` (the same weights in 8 bits)."""
    if r.get("config") and (CATALOG_DIR / r["config"]).is_dir():
        return str(CATALOG_DIR / r["config"]), []
    name = str(r.get("model") or "").strip()
    hit = _catalog_name(name)
    # A quantized re-upload of a catalog model is that model's architecture with the
    # re-upload's weight format (4-bit AWQ/GPTQ, group 128, or FP8).
    for pattern, quant in ((r"-FP8\b", "fp8"), (r"-AWQ\b", "awq"), (r"-GPTQ(-Int4)?\b", "gptq"), (r"-Int4\b", "gptq")):
        if hit is None and re.search(pattern, name, flags=re.IGNORECASE):
            hit = _catalog_name(re.sub(pattern, "", name, flags=re.IGNORECASE))
            if hit is not None and not re.search(pattern, Path(hit).name, flags=re.IGNORECASE):
                return hit, ["--quantization", quant]
    return hit, []


def _catalog_name(name: str) -> str | None:
    if not name:
        return None
    name = re.split(r"\s[\(\[]|\s\+|\s\(|,", name)[0].strip().strip("'\"")
    name = name.rstrip("/").split("/")[-2:]  # org/name or name
    wanted = "/".join(name).lower()
    short = wanted.split("/")[-1]
    exact, near = None, None
    for d in sorted(CATALOG_DIR.iterdir()):
        cid = d.name.replace("__", "/", 1).lower()
        part = cid.split("/", 1)[-1]
        if cid == wanted or part == short:
            exact = exact or str(d)
        elif part in ("meta-" + short, short + "-instruct") or (short.endswith("-instruct") and part == short[: -len("-instruct")]):
            near = near or str(d)  # the same architecture under its catalog name
    return exact or near


def gpu_of(name: str | None, total: float | None):
    text = str(name or "")
    text = re.sub(r"^\s*\d+\s*[x×]\s*", "", text)
    text = text.replace("NVIDIA ", "")
    parts = [p.strip() for p in re.split(r"[(,+]| with ", text) if p.strip()]
    for cand in parts[:1]:
        for variant in (cand, re.sub(r"\s*\d+\s*GB$", "", cand), cand.split(" ")[0] + " " + " ".join(cand.split(" ")[1:2])):
            try:
                return lookup_gpu(variant.strip(), total), variant.strip()
            except OomguardError:
                continue
    if total:
        return lookup_gpu(None, float(total)), f"{total} GiB"
    sizes = [float(x) for x in re.findall(r"(\d+(?:\.\d+)?)\s*GB", str(name or ""))]
    if sizes:
        # "96GB-class GPU", "RTX 5070 Ti 16GB + RTX 5090 D 32GB": the smallest card decides
        return lookup_gpu(None, min(sizes) * 0.98), f"{min(sizes)} GB card"
    return None, None


def flags_from_fragment(text: str) -> list[str] | None:
    """Flag words from a command or a prose fragment; None when there are none."""
    text = text.strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            return None
        out = []
        for k, v in data.items():
            if k in ("model", "dtype") and k == "model":
                continue
            opt = "--" + k.replace("_", "-")
            if v is True:
                out.append(opt)
            elif v is not False and v is not None:
                out += [opt, str(v)]
        return out
    # "(name value)" / "name=value" prose forms
    text = re.sub(r"\(([a-z_\-]+)\s+([\d.]+)\)", r" \1 \2 ", text)
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    out: list[str] = []
    i = 0
    while i < len(words):
        w = words[i].strip("(),;")
        key, eq, val = w.partition("=")
        if key in _PROSE_FLAGS and not w.startswith("-"):
            value = val if eq else (words[i + 1].strip("(),;") if i + 1 < len(words) else "")
            if re.fullmatch(r"[\d.]+", value):
                out += [_PROSE_FLAGS[key], value]
            i += 1 if eq else 2
            continue
        if w.startswith("-") and len(w) > 1 and not re.fullmatch(r"-\d+", w):
            nxt = words[i + 1].strip("(),;") if i + 1 < len(words) else None
            if nxt is not None and not nxt.startswith("-") and nxt not in ("...", "…") and re.fullmatch(r"[\w.:/\-{}\",\[\]]+", nxt) and "<" not in nxt:
                out += [w, nxt]
                i += 2
            else:
                out.append(w)
                i += 1
            continue
        i += 1
    return out or None


def _drop_model(flags: list[str]) -> list[str]:
    """The record's model word(s): the model is the catalog config here."""
    out, i = [], 0
    while i < len(flags):
        if flags[i] == "--model" or flags[i].startswith("--model="):
            i += 1 if "=" in flags[i] else 2
            continue
        out.append(flags[i])
        i += 1
    return out


def env_from_command(text: str) -> dict:
    return dict(re.findall(r"(?:^|\s)([A-Z][A-Z0-9_]+)=([^\s]+)", text.split("vllm")[0]))


def _command(flags: list[str], env: dict, model: str) -> str:
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return (prefix + " " if prefix else "") + "vllm serve " + shlex.quote(model) + " " + shlex.join(flags)


def _flag_only(r: dict) -> dict:
    """A bad-argument record whose model or GPU is unknown: the flag rules alone."""
    command = str(r.get("command") or "")
    flags = flags_from_fragment(command.split(" serve ", 1)[-1] if " serve " in command else command)
    version, _ = version_of(r, "version", "version_estimate")
    row = {"id": r["id"], "version": version or "newest", "flags": " ".join(flags or []), "detected": False, "errors": []}
    if not flags:
        row["why"] = "no flags in the record's command"
        return row
    if version and tuple(int(x) for x in version.split(".")[:2]) < (0, 6):
        row["why"] = f"vLLM {version} is older than the supported tables"
        return row
    try:
        rep = check_target(CheckOptions(version=version), command=[_command(_drop_model(flags), {}, "MODEL")], fix=False)
    except OomguardError as exc:
        row["why"] = f"check could not run: {exc}"
        return row
    row["errors"] = [f.rule for f in rep.errors]
    row["detected"] = any("bad-argument" in get_rule(f.rule).predicts for f in rep.errors)
    return row


def run_failures(verbose: bool) -> dict:
    rows, skipped = [], []
    flag_only: list[dict] = []
    for line in (DATA / "failures.jsonl").read_text().splitlines():
        r = json.loads(line)
        rid, cls = r["id"], r["class"]
        if cls not in MEMORY_OR_ARGUMENT:
            skipped.append((rid, f"class {cls} is not a memory or argument failure"))
            continue
        cfg, inject = catalog_match(r)
        if cfg is None:
            skipped.append((rid, f"model not in the catalog: {r.get('model')!r}"))
            if cls == "bad-argument":
                flag_only.append(_flag_only(r))
            continue
        if "+" in str(r.get("gpu") or ""):
            skipped.append((rid, f"heterogeneous GPUs are not modelled: {r.get('gpu')!r}"))
            continue
        gpu, gpu_name = gpu_of(r.get("gpu"), None)
        if gpu is None:
            skipped.append((rid, f"GPU unknown: {r.get('gpu')!r}"))
            if cls == "bad-argument":
                flag_only.append(_flag_only(r))
            continue
        command = str(r.get("command") or "")
        flags = flags_from_fragment(command.split(" serve ", 1)[-1] if " serve " in command else command)
        if not flags and not re.search(r"vllm serve \S+|api_server", command):
            skipped.append((rid, f"no command flags: {command[:60]!r}"))
            continue
        flags = _drop_model(flags or []) + inject
        version, how = version_of(r, "version", "version_estimate")
        if version and tuple(int(x) for x in version.split(".")[:2]) < (0, 6):
            skipped.append((rid, f"vLLM {version} is older than the supported tables (0.6+)"))
            continue
        other = re.search(r"([\d.]+)\s*GiB held by other", str(r.get("gpu") or ""))
        env = env_from_command(str(r.get("command") or ""))
        opts = CheckOptions(version=version, model=cfg, gpu=None if gpu.name == "custom" else gpu.name,
                            gpu_memory_gib=gpu.total_bytes / 2**30 if gpu.name == "custom" else None, num_gpus=None,
                            other_gpu_use_gib=float(other.group(1)) if other else None)
        try:
            rep = check_target(opts, command=[_command(flags, env, cfg)], fix=False)
        except OomguardError as exc:
            skipped.append((rid, f"check could not run: {exc}"))
            continue
        errors = rep.errors
        match = [f for f in errors if cls in get_rule(f.rule).predicts]
        rows.append({"id": rid, "class": cls, "version": version or "newest", "version_from": how, "gpu": gpu.name,
                     "model": Path(cfg).name, "flags": " ".join(flags), "errors": [f.rule for f in errors],
                     "detected": bool(match), "matched": [f.rule for f in match]})
    return {"rows": rows, "skipped": skipped, "flag_only": flag_only}


def run_startups(verbose: bool) -> dict:
    rows, skipped = [], []
    for line in (DATA / "startup.jsonl").read_text().splitlines():
        r = json.loads(line)
        rid = r["id"]
        if str(r.get("startup_outcome")) != "success":
            skipped.append((rid, f"outcome {r.get('startup_outcome')!r}"))
            continue
        cmd = str(r.get("command") or "")
        if not re.search(r"vllm\s+serve|vllm\.entrypoints|api_server", cmd):
            skipped.append((rid, "no CLI command" if not cmd else f"not a CLI command: {cmd[:40]!r}"))
            continue
        cfg = catalog_config(r)
        if cfg is None:
            skipped.append((rid, "model config not in the catalog"))
            continue
        gpu, _ = gpu_of(r.get("gpu_model") or r.get("gpu_model_estimate"), r.get("gpu_total_mem_gib"))
        if gpu is None:
            skipped.append((rid, "GPU unknown"))
            continue
        flags = flags_from_fragment(cmd.split("serve", 1)[-1] if "serve" in cmd else cmd) or []
        # the model is the catalog config; drop the model positional / --model of the record
        clean = _drop_model(flags)
        version, how = version_of(r, "vllm_version", "vllm_version_estimate")
        env = env_from_command(cmd)
        opts = CheckOptions(version=version, model=cfg, gpu=None if gpu.name == "custom" else gpu.name,
                            gpu_memory_gib=r.get("gpu_total_mem_gib"), num_gpus=r.get("num_gpus"))
        try:
            rep = check_target(opts, command=[_command(clean, env, cfg)], fix=False)
        except OomguardError as exc:
            skipped.append((rid, f"check could not run: {exc}"))
            continue
        rows.append({"id": rid, "version": version or "newest", "version_from": how, "gpu": gpu.name, "model": Path(cfg).name,
                     "flags": " ".join(clean), "errors": [f"{f.rule} {f.message[:90]}" for f in rep.errors],
                     "false_alarm": bool(rep.errors), "planned": rep.ctx.plan is not None})
    return {"rows": rows, "skipped": skipped}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--verbose", action="store_true", help="also list the records left out and why")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    fails = run_failures(a.verbose)
    starts = run_startups(a.verbose)
    det = [x for x in fails["rows"] if x["detected"]]
    fa = [x for x in starts["rows"] if x["false_alarm"]]
    summary = {
        "failures_eligible": len(fails["rows"]),
        "detected": len(det),
        "detection_rate": round(len(det) / len(fails["rows"]), 3) if fails["rows"] else None,
        "startups_eligible": len(starts["rows"]),
        "false_alarms": len(fa),
        "false_alarm_rate": round(len(fa) / len(starts["rows"]), 3) if starts["rows"] else None,
    }
    if a.json:
        print(json.dumps({"summary": summary, "failures": fails, "startups": starts}, indent=1, default=str))
        return 0
    print("failures.jsonl (memory / argument classes with command, model and GPU known):")
    for x in fails["rows"]:
        mark = "DETECTED" if x["detected"] else "missed  "
        print(f"  {mark} {x['id']} {x['class']:22} vLLM {x['version']:12} {x['gpu']:16} {x['model'][:34]:34} errors={','.join(x['errors']) or '-'}  [{x['flags'][:60]}]")
    fo = [x for x in fails["flag_only"] if "why" not in x]
    if fails["flag_only"]:
        print("bad-argument records whose model or GPU is unknown (flag rules only; not in the rate):")
        for x in fails["flag_only"]:
            mark = "DETECTED" if x["detected"] else ("missed  " if "why" not in x else "n/a     ")
            print(f"  {mark} {x['id']} vLLM {x['version']:12} errors={','.join(x['errors']) or '-'}  [{x['flags'][:60]}] {x.get('why', '')}")
    print("startup.jsonl (successful start-ups with a known command):")
    for x in starts["rows"]:
        mark = "FALSE ALARM" if x["false_alarm"] else "clean      "
        print(f"  {mark} {x['id']} vLLM {x['version']:12} {x['gpu']:16} {x['model'][:34]:34} [{x['flags'][:70]}]")
        for e in x["errors"]:
            print(f"      {e}")
    if a.verbose:
        print("left out:")
        for rid, why in fails["skipped"] + starts["skipped"]:
            print(f"  {rid}: {why}")
    print()
    print(f"detection rate:   {summary['detected']}/{summary['failures_eligible']} = {summary['detection_rate']}")
    print(f"false-alarm rate: {summary['false_alarms']}/{summary['startups_eligible']} = {summary['false_alarm_rate']}")
    if fo:
        print(f"bad-argument, flag rules only: {sum(x['detected'] for x in fo)}/{len(fo)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
