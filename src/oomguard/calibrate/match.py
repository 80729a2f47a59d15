"""Match one start-up to the planner: its model config, its GPU, its release; then predicted vs logged.

A start-up is *matched* when oomguard can plan the launch that ran (the arguments the log
printed, read as ``oomguard diagnose`` reads them: ``diagnose.planning.launch_flags``) and
at least one logged figure can be compared. Otherwise it is listed with the reason, and
what would settle it (``--model-dir``, ``--gpu``, ``--vllm-version``).

- **model**: the id or path the log names; a path is looked up under ``--model-dir``
  (``DIR/<last part>``, ``DIR/<org>__<name>``) or through ``OLD=NEW`` prefix maps; an id
  in the HF cache or the bundled catalog; the model of ``--model`` when the log names none.
- **GPU**: a catalog card the log itself names (MoE / FP8 kernel config files name the
  device, nvidia-smi tables pasted in); else ``--gpu``; else the one catalog card with the
  total memory vLLM printed. The total the log printed always wins over the catalog's.
- **release**: the version the log prints; else ``--vllm-version``; V0-format lines without
  a version are planned as 0.6.6 (their family's accounting), and say so.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oomguard.calibrate.startups import StartupFacts
from oomguard.errors import OomguardError, UnsupportedModelError
from oomguard.units import GiB

# Compared per GPU as vLLM prints them (tokens and concurrency are engine-wide).
TERMS = ("weights", "activation", "non_torch", "cuda_graph", "kv_pool", "tokens", "concurrency")
GIB_TERMS = ("weights", "activation", "non_torch", "cuda_graph", "kv_pool")
V0_ASSUMED = "0.6.6"


@dataclass
class Options:
    gpu: str | None = None
    gpu_total_gib: float | None = None  # the total when the log does not print it (--gpu-memory-gib)
    model: str | None = None
    model_dirs: tuple[str, ...] = ()
    vllm_version: str | None = None


@dataclass
class Match:
    """One start-up against the planner."""

    facts: StartupFacts
    status: str  # "matched" | "unmatched"
    reason: str = ""
    release: str | None = None
    model: Any = None  # ModelDescription
    model_name: str | None = None
    gpu: Any = None
    gpu_source: str = ""
    flags: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)
    plan: Any = None
    notes: list[str] = field(default_factory=list)
    key: Any = None  # model.calibration.GroupKey

    @property
    def matched(self) -> bool:
        return self.status == "matched"


def resolve(facts: StartupFacts, opts: Options, models: dict) -> Match:
    """Model, GPU, release and flags of one start-up (``models`` caches configs across start-ups)."""
    from oomguard.diagnose.planning import _release, launch_flags

    m = Match(facts, "unmatched")
    if not facts.logged:
        m.reason = "no ledger line (weights, KV pool, tokens) in this start-up"
        return m
    if facts.args_cut:
        m.reason = (f"the non-default args line is cut off ({facts.args_cut}…): the launch that ran is not known, "
                    "and a guessed one would put its difference into the offsets")
        return m
    # --- release
    version = _release(facts.version) or opts.vllm_version
    if version is None and (facts.engine or "").startswith("V0"):
        version = V0_ASSUMED
        m.notes.append(f"release not printed; V0 log format: planned as {V0_ASSUMED} (the 0.6-0.7 family's accounting)")
    if version is None:
        m.reason = "vLLM release not printed in the log: pass --vllm-version"
        return m
    from oomguard.versions.releases import family_of

    try:
        family_of(version)
    except OomguardError:
        m.reason = f"vLLM {version} is older than the oldest release oomguard models (0.6)"
        return m
    m.release = version
    # --- model
    spec = facts.model or opts.model
    if not spec:
        m.reason = "the log names no model (no non-default args / engine config line): pass --model"
        return m
    model, why = _model(spec, opts, models)
    if model is None:
        m.reason = why
        return m
    m.model, m.model_name = model, spec
    # --- GPU
    gpu, source, why = _gpu(facts, opts)
    if gpu is None:
        m.reason = why
        return m
    m.gpu, m.gpu_source = gpu, source
    # --- the launch that ran
    m.flags = launch_flags(facts.args)
    for k in ("max_seq_len",):
        m.flags.pop(k, None)
    m.env = {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}  # the log shows the length it ran with
    from oomguard.model.engine import parse_version

    if (facts.engine or "").startswith("V0") and parse_version(version) >= (0, 8, 0):
        m.env["VLLM_USE_V1"] = "0"
    return m


def _model(spec: str, opts: Options, models: dict) -> tuple[Any, str]:
    from oomguard.inputs.model_config import load_model
    from oomguard.model.description import ModelDescription

    candidates = _model_candidates(spec, opts.model_dirs)
    last = ""
    for cand in candidates:
        hit = models.get(cand)
        if hit is None:
            try:
                hit = load_model(cand, allow_hub=False)
            except UnsupportedModelError as exc:
                hit = ("unsupported", str(exc))
            except OomguardError as exc:
                hit = ("missing", str(exc))
            models[cand] = hit
        if not isinstance(hit, ModelDescription):  # ("unsupported" | "missing", message)
            if hit[0] == "unsupported":
                return None, f"model {spec}: architecture not modelled ({hit[1][:140]})"
            last = hit[1]
            continue
        return hit, ""
    looks_path = spec.startswith(("/", "./", "../", "~")) or os.sep in spec and len(Path(spec).parts) > 2
    hint = (f"pass --model-dir DIR holding {Path(spec).name}/config.json, or --model-dir {str(Path(spec).parent)}=DIR"
            if looks_path else "pass --model-dir DIR holding its config (DIR/" + spec.replace("/", "__") + "/config.json)")
    return None, f"no config for model {spec!r} on this machine ({last[:120]}): {hint}"


def _model_candidates(spec: str, model_dirs: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    base = Path(spec.rstrip("/")).name
    for d in model_dirs:
        if "=" in d:
            old, new = d.split("=", 1)
            if spec.startswith(old):
                out.append(new + spec[len(old):])
            continue
        for name in (spec.replace("/", "__"), base, spec.lstrip("/")):
            p = Path(d) / name
            if name and str(p) not in out:
                out.append(str(p))
        if "/" not in spec and base:
            # a served name without its organisation ("Qwen2-7B-Instruct"): the catalog's ORG__NAME folders
            out += sorted(str(p) for p in Path(d).glob(f"*__{glob.escape(base)}") if str(p) not in out)
    out.append(spec)
    return out


def _gpu(facts: StartupFacts, opts: Options) -> tuple[Any, str, str]:
    from oomguard.inputs.hardware import find_gpu_in_text, lookup_gpu

    total = facts.total_gib or opts.gpu_total_gib
    for text, where in facts.gpu_names:
        g = find_gpu_in_text(text)
        if g is not None:
            return (lookup_gpu(g.name, total) if total else g), f"named in the log ({where})", ""
    if opts.gpu:
        g = lookup_gpu(opts.gpu, None)
        if total and abs(g.total_bytes / GiB - total) > 1.0:
            # a MIG slice, or another card than --gpu says: the printed total is what vLLM budgeted
            return lookup_gpu(opts.gpu, total), f"--gpu, total {total:g} GiB as the log prints it", ""
        return (lookup_gpu(opts.gpu, total) if total else g), "--gpu", ""
    if total:
        rows = _cards_with_total(total)
        if len(rows) == 1:
            return lookup_gpu(rows[0], total), f"the only catalog card of {total:g} GiB (the total the log prints)", ""
        if rows:
            return None, "", (f"GPU not named in the log; its total {total:g} GiB fits {', '.join(rows[:5])}"
                              f"{' …' if len(rows) > 5 else ''}: pass --gpu")
        return None, "", f"GPU not named in the log and no catalog card has {total:g} GiB: pass --gpu"
    return None, "", "GPU not named in the log and no total printed: pass --gpu"


def _cards_with_total(total: float) -> list[str]:
    from oomguard.inputs.hardware import catalog_rows

    return [r["name"] for r in catalog_rows() if abs(r["total_gib"] - total) <= 0.02]


# ---------------------------------------------------------------- predicted vs logged


def predict(m: Match, calibration=None) -> None:
    """Plan the launch that ran (sets ``m.plan`` and ``m.key``; unmatched with the reason when it cannot)."""
    from oomguard.model.calibration import group_key
    from oomguard.model.planner import plan_launch

    if m.model is None or m.gpu is None or m.release is None:
        return
    tp = int(m.flags.get("tensor_parallel_size") or 1)
    pp = int(m.flags.get("pipeline_parallel_size") or 1)
    try:
        plan = plan_launch(m.model, m.gpu, m.flags, m.env, version=m.release, num_gpus=tp * pp, calibration=calibration)
    except UnsupportedModelError as exc:
        m.status, m.reason = "unmatched", f"the planner does not model this launch ({str(exc)[:140]})"
        return
    except (OomguardError, TypeError, ValueError) as exc:
        m.status, m.reason = "unmatched", f"the launch the log printed cannot be planned ({str(exc)[:160]})"
        return
    m.plan = plan
    m.key = group_key(m.gpu, plan.settings.version, m.model)
    if compare(m):
        m.status, m.reason = "matched", ""
    else:
        m.status, m.reason = "unmatched", "no logged figure the plan predicts (e.g. a concurrency for another length)"


def compare(m: Match, plan=None) -> dict:
    """{term: (predicted, logged)} for every logged term the plan predicts."""
    plan = plan or m.plan
    if plan is None:
        return {}
    r = plan.tight_rank
    lg = m.facts.logged
    out: dict[str, tuple[float, float]] = {}
    pred = {"weights": r.weights.bytes / GiB, "activation": r.activation.bytes / GiB, "non_torch": r.non_torch.bytes / GiB,
            "cuda_graph": r.cuda_graph.bytes / GiB, "kv_pool": r.kv_bytes / GiB}
    for t in GIB_TERMS:
        if t in lg and not (t == "cuda_graph" and r.cuda_graph.bytes == 0):
            out[t] = (pred[t], float(lg[t].value))
    if "tokens" in lg:
        out["tokens"] = (float(plan.kv_cache_tokens), float(lg["tokens"].value))
    c = lg.get("concurrency")
    if c is not None and getattr(c, "length", None) == plan.settings.max_model_len:
        out["concurrency"] = (float(plan.max_concurrency), float(c.value))
    return out


def error(term: str, pred: float, logged: float) -> dict:
    """The error of one term: absolute (GiB, tokens or x) and % of the logged value."""
    d = {"predicted": round(pred, 4 if term in GIB_TERMS else 2), "logged": logged, "error": round(pred - logged, 4)}
    if logged:
        d["error_pct"] = round((pred - logged) / abs(logged) * 100, 2)
    return d
