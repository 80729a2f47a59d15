"""Config-class defaults: what ``AutoConfig`` fills in for the fields a config.json leaves out.

vLLM never reads config.json as a dictionary: ``AutoConfig.from_pretrained`` builds the
``model_type``'s config class, so a field the file omits takes the class's declared default, and a
nested ``text_config`` / ``vision_config`` / ``audio_config`` takes its sub-config class's defaults
(the nested ``text_config`` of Gemma-3 and LLaVA-style checkpoints omits heads or hidden size;
``save_pretrained`` writes nested configs as a diff against their class). Names the class aliases
(``attribute_map``: GPT-2's ``n_embd`` is its ``hidden_size``) are readable under both names.

The defaults are data (``data/config_defaults.json``, written by scripts/gen_config_defaults.py from
transformers' and vLLM's config classes, per transformers release), restricted to the fields the
plan reads (``PLAN_FIELDS``). When transformers is installed next to oomguard at run time and its
release is not in the data (or the data lacks the model_type), the installed classes are asked
instead, through the same ``class_entry`` the generator uses.

Only *declared* defaults are taken: a field whose default is ``None`` and which the class derives in
``__post_init__`` (``num_key_value_heads`` = heads, ``head_dim`` = hidden / heads) is left to the
adapters, which derive it the same way from the values this config actually has.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache

DATA_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "data", "config_defaults.json")  # a string: no pathlib at start-up

# Nested configs AutoConfig builds with their own classes.
SUB_CONFIG_KEYS = ("text_config", "vision_config", "audio_config", "llm_config", "language_config",
                   "thinker_config", "decoder_config", "encoder_config")

# Every config field the plan reads (the adapters in model/architectures/, the generic path, the
# vision tower estimate, max-len derivation). Validation (inputs/model_config.py) checks exactly
# these; defaults are filled for exactly these. tests/unit/inputs/test_config_defaults.py keeps
# the adapters' field names inside this list.
PLAN_FIELDS = (
    # sizes
    "hidden_size", "n_embd", "d_model", "dim", "num_hidden_layers", "n_layer", "num_layers", "n_layers",
    "num_attention_heads", "n_head", "n_heads", "num_heads", "head_dim", "hidden_size_per_head", "kv_channels",
    "num_key_value_heads", "n_head_kv", "num_kv_heads", "multi_query_group_num", "num_attention_groups",
    "multi_query", "intermediate_size", "ffn_dim", "ffn_hidden_size", "n_inner", "d_ff", "hidden_dim",
    "vocab_size", "padded_vocab_size", "tie_word_embeddings", "hidden_act", "activation_function", "activation",
    "attention_bias", "qkv_bias", "bias", "mlp_bias", "use_bias", "attn_output_gate",
    "torch_dtype", "dtype",
    # context length
    "max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
    "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len",
    "original_max_position_embeddings",
    # attention pattern
    "sliding_window", "use_sliding_window", "sliding_window_pattern", "_sliding_window_pattern",
    "max_window_layers", "attention_chunk_size", "full_attention_interval", "global_head_dim",
    "num_global_key_value_heads", "attention_k_eq_v", "num_kv_shared_layers", "use_double_wide_mlp",
    "hidden_size_per_layer_input", "vocab_size_per_layer_input", "use_mrope",
    # experts
    "num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts", "num_experts_per_tok",
    "experts_per_token", "moe_topk", "top_k_experts", "moe_k", "moe_intermediate_size",
    "expert_intermediate_size", "shared_expert_intermediate_size", "n_shared_experts",
    "num_shared_experts", "moe_num_shared_experts", "first_k_dense_replace", "moe_layer_freq",
    "decoder_sparse_step", "enable_moe_block", "interleave_moe_layer_step",
    # latent attention
    "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "index_head_dim",
    # linear attention / state-space layers
    "linear_conv_kernel_dim", "linear_key_head_dim", "linear_num_key_heads", "linear_num_value_heads",
    "linear_value_head_dim", "mamba_ssm_dtype", "state_size", "ssm_state_size", "mamba_d_state",
    "conv_kernel", "mamba_d_conv", "expand", "mamba_expand", "mamba_n_heads", "mamba_head_dim",
    "mamba_n_groups", "n_groups", "attn_layer_period", "attn_layer_offset",
    # vision / audio towers and projectors (architectures/vision.py, the OPT extras)
    "deepstack_visual_indexes", "num_position_embeddings", "encoder_ffn_dim",
    "max_source_positions", "num_mel_bins", "output_dim", "word_embed_proj_dim", "vision_feature_layer",
    "position_embedding_size", "alignment_intermediate_size", "downsample_factor", "scale_factor", "merge_kernel_size",
    "init_pos_emb_height", "init_pos_emb_width",
    # speculative heads in the checkpoint
    "num_nextn_predict_layers", "mtp_num_hidden_layers",
    # encoder-decoder markers
    "is_encoder_decoder", "encoder_layers", "decoder_layers", "num_decoder_layers",
    # vision / audio towers
    "depth", "embed_dim", "patch_size", "image_size", "in_channels", "num_channels", "temporal_patch_size",
    "spatial_merge_size", "out_hidden_size", "mlp_ratio", "mm_tokens_per_image",
    # read by the native adapters added for issue 18 (architectures/{deepseek_v4,mamba,llama4,encoder}.py,
    # decoder.py's ERNIE-4.5 MoE)
    "attention_head_dim", "mamba_num_heads", "mamba_d_head", "mamba_ssm_cache_dtype", "mlp_hidden_act",
    "expert_layer_offset", "expert_layer_period", "shared_intermediate_size", "moe_shared_expert_intermediate_size",
    "moe_layer_start_index", "moe_layer_end_index", "moe_layer_interval", "intermediate_size_mlp",
    "no_rope_layers", "no_rope_layer_interval", "hc_mult", "index_n_heads", "num_hash_layers", "o_groups",
    "o_lora_rank", "num_labels", "id2label",
    # plan19: Falcon-H1, Zamba2, Whisper, ModernBERT, CLIP/SigLIP (architectures/{mamba,encoder}.py)
    "mamba_d_ssm", "n_mamba_heads", "mamba_headdim", "mamba_ngroups", "num_mem_blocks", "hybrid_layer_ids",
    "attention_hidden_size", "adapter_rank", "add_bias_linear", "use_shared_attention_adapter",
    "decoder_attention_heads", "decoder_ffn_dim", "hidden_activation", "classifier_bias", "cross_attention_layers", "multi_query_attention",
    "linear_num_heads", "linear_head_dim", "num_experts_per_token",
)
_PLAN_SET = frozenset(PLAN_FIELDS)
_ROPE_KEYS = ("rope_scaling", "rope_parameters")


# --------------------------------------------------------------------------------------------
# One entry per config class (used by the generator and by the run-time transformers path)
# --------------------------------------------------------------------------------------------


def _plain(value) -> bool:
    return isinstance(value, (bool, int, float, str))


def declared_defaults(cls) -> dict:
    """The class's declared defaults: dataclass fields (transformers 5 ``@strict`` configs) or the
    ``__init__`` signature (older and vLLM-side classes)."""
    import dataclasses
    import inspect

    out: dict = {}
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING:
                out[f.name] = f.default
    else:
        try:
            params = inspect.signature(cls.__init__).parameters
        except (TypeError, ValueError):
            params = {}
        for name, p in params.items():
            if p.default is not inspect.Parameter.empty:
                out[name] = p.default
    return out


def class_entry(cls) -> dict:
    """What the plan needs from one config class: its declared defaults for PLAN_FIELDS, its name
    aliases, and the model_type of each nested config it builds by default."""
    raw = declared_defaults(cls)
    aliases = {k: v for k, v in (getattr(cls, "attribute_map", None) or {}).items() if isinstance(v, str)}
    defaults: dict = {}
    for name, value in raw.items():
        std = next((k for k, v in aliases.items() if v == name), name)
        if std not in _PLAN_SET and name not in _PLAN_SET:
            if name in _ROPE_KEYS and isinstance(value, dict) and _rope_matters(value):
                defaults[name] = value
            continue
        if value is None or not _plain(value):
            continue
        if isinstance(value, float) and value != value or value in (float("inf"), float("-inf")):
            continue
        if name == "is_encoder_decoder" and value is False:
            continue  # PreTrainedConfig's own default, on every class: says nothing
        defaults[std if std in _PLAN_SET else name] = value
    entry: dict = {"class": cls.__name__, "defaults": dict(sorted(defaults.items()))}
    if aliases:
        entry["aliases"] = dict(sorted(aliases.items()))
    subs = {}
    auto = []
    sub_classes = getattr(cls, "sub_configs", None) or {}
    instance = None
    for key in SUB_CONFIG_KEYS:
        if key not in sub_classes:
            continue
        sub_cls = sub_classes[key]
        mt = getattr(sub_cls, "model_type", "") or ""
        if not mt:  # AutoConfig: the nested dict's model_type picks the class; this is the fallback
            auto.append(key)
            try:
                instance = instance or cls()
                mt = getattr(getattr(instance, key, None), "model_type", "") or ""
            except Exception:  # noqa: BLE001 - a class that needs arguments: no default sub-type
                mt = ""
        if mt:
            subs[key] = mt
    if subs:
        entry["sub_configs"] = subs
    if auto:
        entry["auto_sub_configs"] = auto
    return entry


def _rope_matters(rope: dict) -> bool:
    return "factor" in rope or rope.get("rope_type", rope.get("type")) not in (None, "default")


# --------------------------------------------------------------------------------------------
# Run time
# --------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _data() -> dict:
    try:
        with open(DATA_FILE, encoding="utf-8") as fh:
            return json.loads(fh.read())
    except (OSError, ValueError):
        return {"releases": {}}


def data_release() -> str | None:
    releases = _data().get("releases") or {}
    return max(releases, key=_version_key) if releases else None


def _version_key(v: str) -> tuple:
    return tuple(int(p) if p.isdigit() else 0 for p in v.split(".")[:3])


@lru_cache(maxsize=1)
def _installed_transformers() -> str | None:
    """The release of a transformers installed next to oomguard, without importing it."""
    if os.environ.get("OOMGUARD_NO_TRANSFORMERS", "") not in ("", "0"):
        return None
    # The installed distribution's metadata directory names its version
    # (``transformers-4.57.1.dist-info``): what importlib.metadata.version reads, found on
    # sys.path the same way, without importing importlib.metadata (email, zipfile, csv, ...:
    # a third of `plan --json`'s start-up when it was imported here).
    import sys

    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            low = name.lower()
            if low.startswith("transformers-") and low.endswith((".dist-info", ".egg-info")):
                return name[len("transformers-"):].rsplit(".", 1)[0].split("-py")[0]
    return None


@lru_cache(maxsize=256)
def _runtime_entry(model_type: str) -> dict | None:
    try:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING  # optional, heavy

        cls = CONFIG_MAPPING[model_type]
    except Exception:  # noqa: BLE001 - not a transformers model_type, or transformers broken
        return None
    try:
        return class_entry(cls)
    except Exception:  # noqa: BLE001
        return None


def entry(model_type: str) -> tuple[dict | None, str]:
    """(entry, where it came from) for a model_type; (None, "") when nobody knows it."""
    if not model_type:
        return None, ""
    installed = _installed_transformers()
    releases = _data().get("releases") or {}
    if installed and (installed not in releases or model_type not in releases[installed].get("model_types", {})):
        e = _runtime_entry(model_type)
        if e is not None:
            return e, f"transformers {installed} (installed)"
    rel = installed if installed in releases else data_release()
    for r in ([rel] if rel else []) + [r for r in sorted(releases, key=_version_key, reverse=True) if r != rel]:
        e = releases[r].get("model_types", {}).get(model_type)
        if e is not None:
            origin = releases[r].get("origin", {}).get(model_type, f"transformers {r}")
            return e, origin
    return None, ""


def known_model_types() -> set[str]:
    out: set[str] = set()
    for rel in (_data().get("releases") or {}).values():
        out |= set(rel.get("model_types", {}))
    return out


def with_defaults(config: dict) -> tuple[dict, list[str]]:
    """A copy of ``config`` with its class defaults filled in, top level and nested, and one line
    per filled field (``text_config.num_attention_heads = 8 (Gemma3TextConfig default, transformers 5.19.0)``)."""
    out = dict(config)
    applied: list[str] = []
    _fill(out, str(out.get("model_type") or ""), "", applied)
    return out, applied


_TEXT_KEYS = ("text_config", "llm_config", "language_config", "thinker_config", "decoder_config")
_LM_SIZE_FIELDS = ("hidden_size", "num_hidden_layers", "n_embd", "d_model", "n_layer", "num_layers")
# Read from the wrapper when the nested text config does not say (architectures/common.py::text_config).
_INHERITED = ("tie_word_embeddings", "torch_dtype", "dtype")


def _fill(cfg: dict, model_type: str, prefix: str, applied: list[str]) -> None:
    e, origin = entry(model_type)
    if e is None:
        return
    explicit = set(cfg)
    for std, actual in (e.get("aliases") or {}).items():
        if std not in cfg and actual in cfg:
            cfg[std] = cfg[actual]
        elif actual not in cfg and std in cfg:
            cfg[actual] = cfg[std]
    aliases = e.get("aliases") or {}
    for name, value in (e.get("defaults") or {}).items():
        if name in cfg:
            continue
        cfg[name] = value
        if name in aliases and aliases[name] not in cfg:
            cfg[aliases[name]] = value
        applied.append(f"{prefix}{name} = {value!r} ({e.get('class', model_type)} default, {origin})")
    for key, sub_type in (e.get("sub_configs") or {}).items():
        sub = cfg.get(key)
        if sub is None:
            # An absent language-model config is built from the class defaults, unless the file
            # keeps the language model's fields at the top level (the legacy layout those classes
            # still accept: Qwen2-VL's __init__ builds text_config from them). Absent towers are
            # not invented.
            if key not in _TEXT_KEYS or any(k in explicit for k in _LM_SIZE_FIELDS):
                continue
            sub = {}
        if not isinstance(sub, dict):
            continue
        sub = dict(sub)
        for k in _INHERITED:  # an explicit top-level value is what the wrapper passes down
            if k not in sub and k in explicit:
                sub[k] = cfg[k]
        if not prefix and key in ("text_config", "llm_config", "language_config") and "tie_word_embeddings" in explicit and sub.get("tie_word_embeddings") != cfg["tie_word_embeddings"]:
            # vLLM 0.32 config/vllm.py with_hf_config: a multimodal model's language model takes
            # the top-level config's tie_word_embeddings (not a thinker's: Qwen2.5-Omni), whatever its own config says (transformers 5 keeps
            # the tie on the class that sees both layers). Only an explicit one: a class default
            # on the wrapper is what maybe_untie_word_embeddings overrides when the checkpoint
            # ships an lm_head, as published untied checkpoints (Mistral-Small-3.x) do.
            applied.append(f"{prefix}{key}.tie_word_embeddings = {cfg['tie_word_embeddings']!r} "
                           f"(the wrapper's, as vLLM's with_hf_config passes it down)")
            sub["tie_word_embeddings"] = cfg["tie_word_embeddings"]
        # A fixed sub-config class is built whatever model_type the nested dict names (Qwen2-VL
        # files carry "model_type": "qwen2_vl" in vision_config); an AutoConfig one follows it.
        auto = key in (e.get("auto_sub_configs") or ())
        mt = str(sub.get("model_type") or sub_type) if auto else sub_type
        if "model_type" not in sub:
            sub["model_type"] = mt
            applied.append(f"{prefix}{key}.model_type = {mt!r} ({e.get('class', model_type)} default, {origin})")
        _fill(sub, mt, f"{prefix}{key}.", applied)
        cfg[key] = sub
