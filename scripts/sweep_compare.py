"""oomguard against the registry sweep: per case, how far each of oomguard's paths is from vLLM.

Pure: reads a case of tests/data/oracle/sweep_vllm-0.32.0.json (scripts/vllm_registry_sweep.py),
runs oomguard on the case's own config (the native adapter where one is registered, and the
generic path on every case), and compares with what vLLM's code computed:

- ``kv``: per-layer specs (kind, page bytes, block size, window) and KV-cache groups (kind, block
  size, page bytes, layers) as multisets; ``tokens_err``: KV tokens for vLLM's own pinned pool
  memory (PINNED_BLOCKS × vLLM's bytes per block), oomguard's blocks per request and bytes per block
  against vLLM's, as a relative error;
- ``pinned``: GPU KV cache tokens and maximum concurrency with ``num_gpu_blocks_override`` pinned
  (oomguard's plan_launch at vLLM's resolved max_model_len / max_num_batched_tokens / max_num_seqs);
- ``weights``: bytes by part (embed, lm_head, layers, vision) and total, at vLLM's dtype;
- ``activation``: the LM forward peak against scripts/vllm_activation_oracle.py's measurement,
  where the sweep ran it;
- ``max_model_len``: the derived context length.

``level(...)`` turns that into docs/models.md's words: native-exact, native within x %, generic
within x %, refused (why), or not checked (vLLM's CPU build could not build the config).
Used by scripts/gen_models_doc.py and tests/unit/test_registry_sweep.py.
"""

from __future__ import annotations

from collections import Counter

# A part whose vLLM bytes are below this is not compared relatively (a 2-parameter norm).
MIN_PART_BYTES = 1 << 20
# "exact" for weights: parameter counts agree to within rounding of norms/biases.
WEIGHTS_EXACT = 0.005
ACTIVATION_EXACT = 0.05
GPU = "H100"


def _rel(ours: float, theirs: float) -> float:
    if theirs == 0:
        return 0.0 if ours == 0 else 1.0
    return ours / theirs - 1.0


def _layer_key(kind: str, page: int, block: int, window) -> tuple:
    return (kind, int(page), int(block), int(window) if window else None)


SPEC_KIND = {
    "FullAttentionSpec": "full",
    "SinkFullAttentionSpec": "full",
    "SlidingWindowSpec": "sliding_window",
    "SlidingWindowMLASpec": "sliding_window",  # DeepSeek-V4 sliding-window / compressor-state caches
    "ChunkedLocalAttentionSpec": "chunked_local",
    "MLAAttentionSpec": "mla",
    "MambaSpec": "mamba",
    "CrossAttentionSpec": "cross",
}


def _vllm_layers(rec: dict) -> Counter:
    out: Counter = Counter()
    for run in rec.get("layers") or []:
        kind = SPEC_KIND.get(run["spec"], run["spec"])
        out[_layer_key(kind, run["page_size_bytes"], run["block_size"], run.get("sliding_window"))] += run["count"]
    return out


def _vllm_groups(rec: dict) -> Counter:
    out: Counter = Counter()
    for g in rec.get("groups") or []:
        kind = SPEC_KIND.get(g["spec"])
        if kind is None:
            kinds = {SPEC_KIND.get(n, n) for n in g.get("member_specs", ())}
            kind = kinds.pop() if len(kinds) == 1 else "/".join(sorted(kinds))
        out[(kind, g["block_size"], g["page_size_bytes"], g["num_layers"])] += 1
    return out


def describe_case(case: dict, *, force_generic: bool = False, config: dict | None = None):
    """oomguard's description of the case's config, or the refusal as a string."""
    from oomguard.errors import OomguardError
    from oomguard.inputs.model_config import describe_config

    try:
        return describe_config(config if config is not None else case["config"], source=f"sweep:{case['id']}",
                               name=case["id"], force_generic=force_generic)
    except OomguardError as exc:
        return f"{type(exc).__name__}: {exc}"


def _dtype_bytes(rec: dict) -> int:
    return {"float32": 4, "bfloat16": 2, "float16": 2}.get(str(rec.get("model_dtype")), 2)


def compare_kv(model, rec: dict, bpr: int | None = None) -> dict:
    """``bpr``: oomguard's blocks per max-length request from its pinned plan (the engine settings
    it resolves for this launch: concurrent batches, Mamba blocks); without a plan, none."""
    from oomguard.model.kv_spec import kv_layout, layer_kv_specs

    b = _dtype_bytes(rec)
    specs = layer_kv_specs(model, tp=1, kv_cache_dtype="auto", dtype_bytes=b)
    layout = kv_layout(specs)
    ours_layers: Counter = Counter(_layer_key(s.kind, s.page_size_bytes, s.block_size, s.sliding_window) for s in specs)
    ours_groups: Counter = Counter((g.kind, g.block_size, g.page_size_bytes, len(g.specs)) for g in layout.groups)
    theirs_layers, theirs_groups = _vllm_layers(rec), _vllm_groups(rec)
    out = {
        "layers_match": ours_layers == theirs_layers,
        "groups_match": ("groups" not in rec) or ours_groups == theirs_groups,
        "bytes_per_token": sum(s.page_size_bytes / s.block_size for s in specs if s.kind != "mamba"),
        "vllm_bytes_per_token": rec.get("bytes_per_token_all_layers") or 0,
    }
    if not out["layers_match"]:
        diff = (ours_layers - theirs_layers) + (theirs_layers - ours_layers)
        out["detail"] = (f"layers (kind, page, block, window): oomguard {sorted((ours_layers - theirs_layers).items())[:3]} "
                         f"vs vLLM {sorted((theirs_layers - ours_layers).items())[:3]}") if diff else ""
    elif not out["groups_match"]:
        out["detail"] = f"groups: oomguard {sorted(ours_groups.items())[:4]} vs vLLM {sorted(theirs_groups.items())[:4]}"
    pinned = rec.get("pinned") or {}
    settings = rec.get("settings") or {}
    if pinned.get("bytes_per_block") and settings.get("max_model_len") and layout.groups and bpr:
        L = settings["max_model_len"]
        memory = pinned["num_blocks"] * pinned["bytes_per_block"]
        ours_tokens = int((memory // layout.bytes_per_block) / bpr * L) if layout.bytes_per_block else 0
        out["tokens_err"] = _rel(ours_tokens, pinned["tokens"])
        out["bytes_per_block"] = [layout.bytes_per_block, pinned["bytes_per_block"]]
    elif not layout.groups and not theirs_groups and not rec.get("layers"):
        out["tokens_err"] = 0.0  # no KV cache on either side
    out["exact"] = bool(out["layers_match"] and out["groups_match"] and abs(out.get("tokens_err", 1.0)) < 1e-9)
    return out


def compare_pinned(model, rec: dict) -> tuple[dict | None, object]:
    """(comparison, oomguard's plan) for the pinned pool; (None, None) without one."""
    pinned, settings = rec.get("pinned"), rec.get("settings") or {}
    if not pinned or not settings.get("max_model_len") or not pinned.get("num_groups"):
        return None, None
    from oomguard.inputs.hardware import lookup_gpu
    from oomguard.model.planner import plan_launch

    flags = {
        "num_gpu_blocks_override": pinned["num_blocks"],
        "max_model_len": settings["max_model_len"],
        "max_num_batched_tokens": settings["max_num_batched_tokens"],
        "max_num_seqs": settings["max_num_seqs"],
        "enforce_eager": True,
        "dtype": str(rec.get("model_dtype") or "auto"),
    }
    env = {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}
    plan = plan_launch(model, lookup_gpu(GPU), flags, env, version="0.32.0")
    out = {
        "tokens": [plan.kv_cache_tokens, pinned["tokens"]],
        "concurrency": [round(plan.max_concurrency, 4), round(pinned["max_concurrency"], 4)],
        "tokens_err": _rel(plan.kv_cache_tokens, pinned["tokens"]),
        "concurrency_err": _rel(plan.max_concurrency, pinned["max_concurrency"]),
    }
    out["exact"] = plan.kv_cache_tokens == pinned["tokens"] and abs(out["concurrency_err"]) < 1e-6
    return out, plan


def compare_weights(model, rec: dict) -> dict | None:
    w = rec.get("weights")
    if not w:
        return None
    from oomguard.model.quantization import WeightCosts, weight_costs
    from oomguard.model.weights import weight_split

    costs = WeightCosts(dict(model.category_bytes)) if model.category_bytes else weight_costs(model.quantization, model.dtype_bytes, {}, None)
    split = weight_split(model, costs, tp=1, dtype_bytes=_dtype_bytes(rec))
    ours = {"embed": split.embed_bytes, "lm_head": split.lm_head_bytes, "layers": split.layers_bytes + split.mtp_bytes,
            "vision": split.vision_bytes}
    theirs = w["parts"]
    parts = {}
    for k, v in theirs.items():
        if max(v, ours.get(k, 0)) >= MIN_PART_BYTES:
            parts[k] = round(_rel(ours.get(k, 0), v), 4)
    total_o, total_v = sum(ours.values()), w["total"]
    return {"total_err": _rel(total_o, total_v), "parts": parts, "bytes": [int(total_o), int(total_v)]}


def compare_activation(case: dict, model_for, act: dict) -> dict | None:
    if not act or "error" in act or "peak_bytes" not in act:
        return None
    from oomguard.model import phases

    config = _apply_overrides(case_config(case), act.get("overrides") or {})
    m = model_for(config)
    if isinstance(m, str):
        return {"error": m}
    ours, _, top = phases.forward_peak_bytes(m, act["T"], act.get("tp", 1), 4, platform="cpu")
    return {"err": _rel(ours, act["peak_bytes"]), "bytes": [int(ours), int(act["peak_bytes"])], "top": top.name}


def _apply_overrides(config: dict, overrides: dict) -> dict:
    """The activation variant (scripts/vllm_activation_oracle.py::_variant_config's record)."""
    import json

    config = json.loads(json.dumps(config))
    for key, value in overrides.items():
        if key in ("stripped", "kept"):
            if key == "stripped":
                for h in (config, config.get("text_config") or {}):
                    h.pop("quantization_config", None)
            continue
        holder = config
        if key.startswith("text_config."):
            holder, key = config.setdefault("text_config", {}), key.split(".", 1)[1]
        holder[key] = value
        if key == "num_hidden_layers":
            for lk in ("layer_types", "mlp_only_layers"):
                if isinstance(holder.get(lk), list):
                    holder[lk] = holder[lk][:value]
    return config


def case_config(case: dict) -> dict:
    """The config vLLM built: without quantization_config where the CPU build had to drop it
    (scripts/vllm_kv_oracle.py step 4: the retry records quantization_stripped)."""
    import json

    config = (case.get("vllm") or {}).get("config_used") or case["config"]  # the sweep's CPU fallback
    if (case.get("vllm") or {}).get("quantization_stripped"):
        config = json.loads(json.dumps(config))
        for holder in (config, config.get("text_config") or {}):
            holder.pop("quantization_config", None)
    return config


def compare_case(case: dict, *, force_generic: bool = False) -> dict:
    """One path of oomguard against one sweep case."""
    rec = case.get("vllm") or {}
    model = describe_case(case, force_generic=force_generic, config=case_config(case))
    if isinstance(model, str):
        return {"path": "refused", "reason": model.split(": ", 1)[-1][:300]}
    out: dict = {"path": model.coverage if not force_generic else "generic", "family": model.family,
                 "model_type": model.model_type}
    if "error" in rec:
        return out
    plan = None
    try:
        r, plan = compare_pinned(model, rec)
    except Exception as exc:  # noqa: BLE001 - an oomguard failure on a config is data here
        r = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    if r is not None:
        out["pinned"] = r
    bpr = getattr(plan, "blocks_per_request", None)
    for name, fn in (("kv", lambda m, rr: compare_kv(m, rr, bpr)), ("weights", compare_weights)):
        try:
            r = fn(model, rec)
        except Exception as exc:  # noqa: BLE001
            r = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        if r is not None:
            out[name] = r
    settings = rec.get("settings") or {}
    if settings.get("max_model_len"):
        from oomguard.model.engine import derive_len, longrope_default_len

        # vLLM's resolved default (no --max-model-len): LongRoPE models default to the short length
        v = (0, 32, 0)
        out["max_model_len"] = [longrope_default_len(model, v) or derive_len(model, v), settings["max_model_len"]]
    act = case.get("activation")
    if act:
        try:
            r = compare_activation(case, lambda c: describe_case(case, force_generic=force_generic, config=c), act)
        except Exception as exc:  # noqa: BLE001
            r = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        if r is not None:
            out["activation"] = r
    out["distance"] = distance(out)
    return out


def distance(cmp: dict) -> float | None:
    """The largest relative error over KV tokens, pinned tokens/concurrency, weights, activation."""
    errs = []
    kv = cmp.get("kv") or {}
    if "error" in kv or (kv and "tokens_err" not in kv and not kv.get("layers_match")):
        return None
    if "tokens_err" in kv:
        errs.append(abs(kv["tokens_err"]))
    p = cmp.get("pinned") or {}
    if "error" in p:
        return None
    errs += [abs(p.get("tokens_err", 0)), abs(p.get("concurrency_err", 0))]
    w = cmp.get("weights") or {}
    if "error" in w:
        return None
    if w:
        errs.append(abs(w["total_err"]))
    a = cmp.get("activation") or {}
    if "err" in a:
        errs.append(abs(a["err"]))
    return max(errs) if errs else None


def is_exact(cmp: dict) -> bool:
    kv, p, w, a = (cmp.get(k) or {} for k in ("kv", "pinned", "weights", "activation"))
    ml = cmp.get("max_model_len")
    return bool(kv.get("exact") and (not p or p.get("exact")) and w and abs(w.get("total_err", 1)) <= WEIGHTS_EXACT
                and (not a or abs(a.get("err", 1)) <= ACTIVATION_EXACT) and (not ml or ml[0] == ml[1]))


def level(case: dict, native: dict, generic: dict) -> dict:
    """docs/models.md's verdict for one case (the oomguard path a user gets: native if an adapter
    takes it, else generic, else refused)."""
    rec = case.get("vllm") or {}
    user = native
    if "error" in rec:
        return {"level": "unchecked", "path": user["path"], "why": "vLLM's CPU build could not build this config: " + rec["error"][:200]}
    if user["path"] == "refused":
        return {"level": "refused", "path": "refused", "why": user["reason"]}
    d = user.get("distance")
    if user["path"] == "native":
        if is_exact(user):
            return {"level": "native-exact", "path": "native", "distance": d}
        return {"level": "native", "path": "native", "distance": d, "why": _why(user)}
    return {"level": "generic", "path": "generic", "distance": d, "why": _why(user)}


def _why(cmp: dict) -> str:
    bits = []
    kv = cmp.get("kv") or {}
    if kv.get("error"):
        bits.append("KV: " + kv["error"])
    elif kv and not (kv.get("layers_match") and kv.get("groups_match")):
        bits.append("KV layout differs" + (f" ({kv['detail']})" if kv.get("detail") else ""))
    if "tokens_err" in kv and abs(kv["tokens_err"]) >= 0.0005:
        bits.append(f"KV tokens {kv['tokens_err']:+.1%}")
    p = cmp.get("pinned") or {}
    if p.get("error"):
        bits.append("pinned pool: " + p["error"])
    elif p and not p.get("exact"):
        bits.append(f"concurrency {p['concurrency_err']:+.1%}")
    w = cmp.get("weights") or {}
    if w.get("error"):
        bits.append("weights: " + w["error"])
    elif w and abs(w["total_err"]) > WEIGHTS_EXACT:
        worst = max(w["parts"].items(), key=lambda kv_: abs(kv_[1]), default=None)
        bits.append(f"weights {w['total_err']:+.1%}" + (f" ({worst[0]} {worst[1]:+.1%})" if worst else ""))
    a = cmp.get("activation") or {}
    if "err" in a and abs(a["err"]) > ACTIVATION_EXACT:
        bits.append(f"activation {a['err']:+.1%}")
    ml = cmp.get("max_model_len")
    if ml and ml[0] != ml[1]:
        bits.append(f"max_model_len {ml[0]:,} vs vLLM {ml[1]:,}")
    return "; ".join(bits)
