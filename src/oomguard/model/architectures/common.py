"""Config-reading helpers shared by the architecture adapters.

These encode vLLM's own rules for reading a Hugging Face config
(``transformers_utils/config.py``, ``config/model.py`` @0.33): which field
names carry KV heads, how head size is derived, and which keys bound the
context length.
"""

from __future__ import annotations

from oomguard.errors import UnsupportedModelError

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from typing import Any

# vLLM CONFIG_FIELD_ALIASES for the KV-head count, first match wins.
KV_HEAD_FIELDS = ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num", "num_attention_groups")
# config/model.py::_get_and_verify_max_len: the smallest of these present.
MAX_LEN_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
# Rope types whose factor does not multiply the derived length, by vLLM version
# (config/model.py::_get_and_verify_max_len; docs/memory-model.md#engine-defaults).
ROPE_EXEMPT_NEW = {"su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling"}
ROPE_EXEMPT_OLD = {"su", "longrope", "llama3"}

DTYPE_NAMES = {
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "float32": "float32",
    "float": "float32",
    "fp32": "float32",
}


def text_config(config: dict) -> dict:
    """The language-model part of a (possibly multimodal) config. Omni models keep it one level
    deeper, under ``thinker_config`` (Qwen2.5-Omni / Qwen3-Omni: vLLM serves the thinker)."""
    thinker = config.get("thinker_config")
    if isinstance(thinker, dict) and isinstance(thinker.get("text_config"), dict):
        merged = text_config(thinker)
        for k in ("tie_word_embeddings", "torch_dtype", "dtype", "quantization_config"):
            if k not in merged and k in config:
                merged[k] = config[k]
        return merged
    for key in ("text_config", "llm_config", "language_config"):
        sub = config.get(key)
        if isinstance(sub, dict) and sub:
            merged = dict(sub)
            # Some wrappers keep tie_word_embeddings / dtype at top level only.
            for k in ("tie_word_embeddings", "torch_dtype", "dtype", "quantization_config"):
                if k not in merged and k in config:
                    merged[k] = config[k]
            return merged
    return config


def need(cfg: dict, *names: str, what: str, model_type: str) -> Any:
    for n in names:
        v = cfg.get(n)
        if v is not None:
            return v
    raise UnsupportedModelError(
        f"model_type {model_type!r}: config has none of {', '.join(names)} ({what}); "
        "cannot model this architecture exactly"
    )


def num_kv_heads(cfg: dict, default: int) -> int:
    for name in KV_HEAD_FIELDS:
        v = cfg.get(name)
        if v:
            return int(v)
    return default


def head_size(cfg: dict, hidden: int, heads: int) -> int:
    hd = cfg.get("head_dim")
    if isinstance(hd, int) and hd > 0:
        return hd
    hs = cfg.get("hidden_size_per_head")
    if isinstance(hs, int) and hs > 0:
        return hs
    return hidden // heads


def model_dtype(config: dict, cfg: dict) -> str:
    raw = cfg.get("torch_dtype") or cfg.get("dtype") or config.get("torch_dtype") or config.get("dtype") or "bfloat16"
    name = DTYPE_NAMES.get(str(raw).replace("torch.", ""), "bfloat16")
    return name


def max_len_from_keys(cfg: dict) -> int | None:
    if cfg.get("model_max_length"):
        return int(cfg["model_max_length"])
    found = [int(cfg[k]) for k in MAX_LEN_KEYS if isinstance(cfg.get(k), (int, float)) and cfg.get(k)]
    return min(found) if found else None


def rope_scaling(cfg: dict) -> dict | None:
    rs = cfg.get("rope_scaling")
    if not isinstance(rs, dict) or not rs:
        rp = cfg.get("rope_parameters")
        if isinstance(rp, dict) and ("factor" in rp or rp.get("rope_type") not in (None, "default")):
            rs = rp
        else:
            return None
    rs = dict(rs)
    if "rope_type" not in rs and "type" in rs:
        rs["rope_type"] = rs["type"]
    return rs


def derive_max_model_len(base: int | None, rope: dict | None, model_type: str, *, new_rules: bool = True) -> int:
    """vLLM's derived maximum context length (before the user's --max-model-len).

    ``new_rules`` selects the >= 0.30 treatment of YaRN (max_position_embeddings
    already scaled); older releases multiplied ``original_max_position_embeddings``.
    """
    if base is None:
        return 2048  # vLLM's fallback with a warning
    derived = float(base)
    if rope and not model_type.startswith("gemma3"):
        rtype = str(rope.get("rope_type", ""))
        factor = float(rope.get("factor", 1.0) or 1.0)
        exempt = ROPE_EXEMPT_NEW if new_rules else ROPE_EXEMPT_OLD
        if rtype == "longrope":
            pass
        elif rtype not in exempt and rtype not in ("", "default", "mrope"):
            if rtype == "yarn" and not new_rules and rope.get("original_max_position_embeddings"):
                derived = float(rope["original_max_position_embeddings"]) * factor
            else:
                derived *= factor
    return int(derived)


def pad_vocab(vocab: int, pad: int = 64) -> int:
    return -(-vocab // pad) * pad


def first_architecture(config: dict) -> str:
    """The config's first ``architectures`` entry (the class vLLM's registry resolves), "" if none."""
    return (config.get("architectures") or [""])[0]

