"""Decoder-only transformers: dense, MoE, sliding-window and Gated DeltaNet hybrids.

One adapter covers the families whose layers are "attention (full, sliding
window or GDN linear attention) + MLP (dense or experts)". Per-layer kinds come
from ``layer_types`` when the config has it (vLLM's model files read it), else
from the family's documented pattern.
"""

from __future__ import annotations

from oomguard.model.architectures import register
from oomguard.model.architectures.builder import build_description
from oomguard.model.architectures.common import (
    first_architecture,
    head_size,
    max_len_from_keys,
    model_dtype,
    need,
    num_kv_heads,
    rope_scaling,
)
from oomguard.model.architectures.vision import TOWER_KEYS
from oomguard.model.description import DTYPE_BYTES, AttentionLayer, LayerKind, MambaState, ModelDescription, MoE


DENSE = (
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "granite",
    "phi3",
    "gemma",
    "gemma2",
    "gemma3_text",
    "gemma3",
    "opt",
    "qwen2_vl",
    "qwen2_5_vl",
    "qwen2_vl_text",
    "qwen2_5_vl_text",
    "qwen3_vl_text",
    "qwen3_vl",
    "phi3_v",
    "internlm2",
    "olmo2",
    "starcoder2",
    "cohere",
    "exaone",
    # checked against vLLM 0.32 (scripts/vllm_kv_oracle.py, transformers config-class defaults)
    "ernie4_5",
    "seed_oss",
    "smollm3",
    "cohere2",
    "olmo3",
    "glm4v_text",  # GLM-4.1V / GLM-4.5V-style wrappers' text models
    "qwen2_5_omni_text",  # the Qwen2.5-Omni thinker's text model
)
MOE = ("mixtral", "qwen2_moe", "qwen3_moe", "qwen3_vl_moe_text", "qwen3_vl_moe", "gpt_oss", "glm4_moe", "minimax_m2", "olmoe",
       "ernie4_5_moe", "glm4v_moe_text")
HYBRID_GDN = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "qwen3_5", "qwen3_5_moe")
# Two-matrix MLPs (up, act, down) instead of gate_up: OPT's fc1/fc2 (models/opt.py) and
# Starcoder2's c_fc/c_proj (transformers' Starcoder2MLP; vLLM 0.32 serves it through the
# Transformers backend). Every other type above builds a MergedColumnParallelLinear gate_up.
UNGATED_MLP = ("opt", "starcoder2")
MULTIMODAL = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "gemma3", "phi3_v", "qwen3_5", "qwen3_5_moe", "mllama",
              "glm4v", "glm4v_moe", "qwen2_5_omni_thinker", "qwen2_5_omni")


def _layer_types(cfg: dict, model_type: str, n: int) -> list[str]:
    lt = cfg.get("layer_types")
    if isinstance(lt, list) and len(lt) >= n:
        return [str(x) for x in lt[:n]]
    window = cfg.get("sliding_window")
    if model_type in HYBRID_GDN:
        interval = int(cfg.get("full_attention_interval") or 4)
        return ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(n)]
    if model_type == "gemma2" and window:
        # HF Gemma2: even layers slide (is_sliding = not layer_idx % 2).
        return ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]
    if model_type in ("gemma3_text", "gemma3") and window:
        pattern = int(cfg.get("sliding_window_pattern") or cfg.get("_sliding_window_pattern") or 6)
        return ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(n)]
    if model_type in ("mistral", "phi3") and window and cfg.get("use_sliding_window", True):
        # vLLM reads config.sliding_window for every layer of these (checked for Phi-4-mini
        # against vLLM 0.32: window 262144 even though it exceeds max_position_embeddings).
        return ["sliding_attention"] * n
    return ["full_attention"] * n


def _ernie_moe(cfg: dict, n: int) -> tuple[MoE | None, list[bool]]:
    """ERNIE-4.5 MoE (models/ernie45_moe.py): experts on layers moe_layer_start_index ..
    moe_layer_end_index with (i + 1) % moe_layer_interval == 0; moe_num_shared_experts shared
    experts of moe_intermediate_size each, as one MLP."""
    e = int(cfg.get("moe_num_experts") or 0)
    if not e:
        return None, [False] * n
    start, end = int(cfg.get("moe_layer_start_index") or 0), cfg.get("moe_layer_end_index")
    end = n - 1 if end is None else int(end)
    interval = int(cfg.get("moe_layer_interval") or 1)
    is_moe = [start <= i <= end and (i + 1) % interval == 0 for i in range(n)]
    ie = int(need(cfg, "moe_intermediate_size", what="expert intermediate size", model_type="ernie4_5_moe"))
    return MoE(e, int(need(cfg, "moe_k", what="experts per token", model_type="ernie4_5_moe")), ie,
               int(cfg.get("moe_num_shared_experts") or 0) * ie, num_moe_layers=sum(is_moe),
               num_dense_layers=n - sum(is_moe), dense_intermediate_size=int(cfg.get("intermediate_size") or 0)), is_moe


def _moe(cfg: dict, model_type: str, n: int) -> tuple[MoE | None, list[bool]]:
    if model_type == "ernie4_5_moe":
        return _ernie_moe(cfg, n)
    experts = cfg.get("num_experts") or cfg.get("num_local_experts") or cfg.get("n_routed_experts")
    if not experts or model_type not in MOE + HYBRID_GDN:
        return None, [False] * n
    top_k = int(need(cfg, "num_experts_per_tok", "experts_per_token", "moe_topk", what="experts per token", model_type=model_type))
    expert_i = int(cfg.get("moe_intermediate_size") or cfg.get("intermediate_size"))
    shared = int(cfg.get("shared_expert_intermediate_size") or 0)
    if not shared and cfg.get("n_shared_experts"):
        shared = int(cfg["n_shared_experts"]) * expert_i
    first_dense = int(cfg.get("first_k_dense_replace") or 0)
    only_mlp = set(cfg.get("mlp_only_layers") or [])
    step = int(cfg.get("decoder_sparse_step") or 1)
    is_moe = [i >= first_dense and i not in only_mlp and (i + 1) % step == 0 for i in range(n)]
    moe = MoE(
        num_experts=int(experts),
        top_k=top_k,
        expert_intermediate_size=expert_i,
        shared_intermediate_size=shared,
        num_moe_layers=sum(is_moe),
        num_dense_layers=n - sum(is_moe),
        dense_intermediate_size=int(cfg.get("intermediate_size") or 0),
    )
    return moe, is_moe


def _gdn_state(cfg: dict, model_type: str, dtype: str) -> MambaState:
    nk = int(need(cfg, "linear_num_key_heads", what="GDN key heads", model_type=model_type))
    nv = int(need(cfg, "linear_num_value_heads", what="GDN value heads", model_type=model_type))
    dk = int(need(cfg, "linear_key_head_dim", what="GDN key head dim", model_type=model_type))
    dv = int(need(cfg, "linear_value_head_dim", what="GDN value head dim", model_type=model_type))
    kernel = int(cfg.get("linear_conv_kernel_dim") or 4)
    model_b = DTYPE_BYTES[dtype]
    ssm = cfg.get("mamba_ssm_dtype")
    ssm_b = DTYPE_BYTES.get(str(ssm), model_b) if ssm else model_b
    return MambaState(
        variant="gdn",
        conv_dim=2 * nk * dk + nv * dv,
        conv_kernel=kernel,
        num_heads=nv,
        head_k_dim=dk,
        head_v_dim=dv,
        n_groups=nk,
        conv_dtype_bytes=model_b,
        ssm_dtype_bytes=ssm_b,
    )


@register(*DENSE, *MOE, *HYBRID_GDN)
def describe_decoder(config: dict, cfg: dict, *, source: str, name: str, hf_quant: dict | None) -> ModelDescription:
    model_type = str(cfg.get("model_type") or config.get("model_type"))
    hidden = int(need(cfg, "hidden_size", "d_model", "n_embd", what="hidden size", model_type=model_type))
    n = int(need(cfg, "num_hidden_layers", "n_layer", "num_layers", what="layer count", model_type=model_type))
    heads = int(need(cfg, "num_attention_heads", "n_head", what="attention heads", model_type=model_type))
    kv = num_kv_heads(cfg, heads)
    hd = head_size(cfg, hidden, heads)
    inter = int(cfg.get("intermediate_size") or cfg.get("ffn_dim") or 4 * hidden)
    vocab = int(need(cfg, "vocab_size", what="vocabulary size", model_type=model_type))
    dtype = model_dtype(config, cfg)
    types = _layer_types(cfg, model_type, n)
    moe, is_moe = _moe(cfg, model_type, n)
    window = cfg.get("sliding_window")
    if model_type == "cohere2" and window:
        # models/commandr.py: a Cohere2 sliding layer sees [pos - window, pos], so vLLM builds it
        # with sliding_window + 1 (the oracle records 4097 for 4096)
        window = int(window) + 1
    layers = []
    gdn = _gdn_state(cfg, model_type, dtype) if "linear_attention" in types else None
    for i, t in enumerate(types):
        if t in ("sliding_attention", "sliding_window") and window:
            layers.append(AttentionLayer(LayerKind.SLIDING_WINDOW, kv, hd, hd, sliding_window=int(window), moe=is_moe[i]))
        elif t == "linear_attention":
            layers.append(AttentionLayer(LayerKind.MAMBA, mamba=gdn, moe=is_moe[i]))
        elif t in ("chunked_attention",):
            chunk = int(cfg.get("attention_chunk_size") or 8192)
            layers.append(AttentionLayer(LayerKind.CHUNKED_LOCAL, kv, hd, hd, chunk_size=chunk, moe=is_moe[i]))
        elif t in ("full_attention", "sliding_attention", "attention"):
            layers.append(AttentionLayer(LayerKind.FULL, kv, hd, hd, moe=is_moe[i]))
        else:
            from oomguard.errors import UnsupportedModelError

            raise UnsupportedModelError(f"{source}: layer type {t!r} of model_type {model_type!r} is not modelled")
    rope = rope_scaling(cfg)
    base_len = max_len_from_keys(cfg)
    tie = bool(cfg.get("tie_word_embeddings", config.get("tie_word_embeddings", model_type.startswith("gemma"))))
    if model_type == "opt":
        tie = True  # OPT ties its output projection to the embedding
    is_mm = config.get("model_type") in MULTIMODAL or any(k in config for k in TOWER_KEYS)
    mrope = bool(
        cfg.get("use_mrope")
        or (isinstance(cfg.get("rope_scaling"), dict) and "mrope_section" in cfg["rope_scaling"])
        or (isinstance(cfg.get("rope_parameters"), dict) and "mrope_section" in cfg["rope_parameters"])
    )
    return build_description(
        config, cfg, name=name, source=source, model_type=model_type, hf_quant=hf_quant, max_len=base_len, rope=rope,
        multimodal=is_mm,
        family="hybrid-gdn" if gdn else ("moe" if moe else "dense"),
        hidden_size=hidden,
        num_layers=n,
        num_attention_heads=heads,
        num_kv_heads=kv,
        head_size=hd,
        intermediate_size=inter,
        vocab_size=vocab,
        tie_word_embeddings=tie,
        layers=tuple(layers),
        moe=moe,
        attn_output_gate=bool(cfg.get("attn_output_gate", model_type in HYBRID_GDN)),
        qkv_bias=bool(cfg.get("attention_bias") or model_type.startswith("qwen2") or model_type == "opt"),
        num_mtp_layers=int(cfg.get("mtp_num_hidden_layers") or cfg.get("num_nextn_predict_layers") or 0),
        mrope=mrope,
        pooling=_pooling_architecture(first_architecture(config)),
        notes=_runner_notes(first_architecture(config)),
        gated_mlp=model_type not in UNGATED_MLP,
        extra_params=_opt_extras(cfg, hidden) if model_type == "opt" else None,
    )


def _opt_extras(cfg: dict, hidden: int) -> dict:
    """OPT's parameters outside the decoder layers (models/opt.py OPTDecoder): the learned
    position embedding (max_position_embeddings + 2 rows, a replicated nn.Embedding) and, where
    word_embed_proj_dim differs from hidden_size (opt-350m), project_in / project_out
    (replicated, no bias). Checked against vLLM 0.32's weight numel in the registry sweep."""
    proj = int(cfg.get("word_embed_proj_dim") or hidden)
    extra = (int(cfg.get("max_position_embeddings") or 2048) + 2) * hidden
    if proj != hidden:
        extra += 2 * proj * hidden
    return {"unquantized": [extra, False]}


# Bare backbones vLLM 0.32's registry (_EMBEDDING_MODELS) maps to a generative class
# (LlamaForCausalLM, Qwen2ForCausalLM, Gemma2ForCausalLM): config/model.py
# _get_default_runner_type finds no pooling class for them, so they run with the generate runner
# (sampler warm-up, async scheduling) unless the checkpoint ships a Sentence-Transformers pooling
# config (modules.json), which a config.json does not show. Checked in the registry sweep
# (runner "generate" recorded for LlamaModel, MistralModel, Gemma2Model).
GENERATE_BY_DEFAULT = ("LlamaModel", "MistralModel", "Gemma2Model", "Qwen2Model")


def _pooling_architecture(arch: str) -> bool:
    """Architectures vLLM serves with the pooling runner (registry _EMBEDDING_MODELS /
    _CROSS_ENCODER_MODELS): sequence classifiers and rerankers, reward models, and the bare
    ``*Model`` backbones used as embedders (Qwen3-Embedding's Qwen3Model, ...), except those
    vLLM maps to a generative class (GENERATE_BY_DEFAULT).
    A ``*ForCausalLM`` embedder (Qwen3-Embedding's published config) needs ``--runner pooling``."""
    if arch in GENERATE_BY_DEFAULT:
        return False
    return arch.endswith(("ForSequenceClassification", "ForRewardModel", "ForTokenClassification", "ForProcessRewardModel")) or (
        arch.endswith("Model") and not arch.endswith(("LMHeadModel", "PreTrainedModel")))


def _runner_notes(arch: str) -> tuple[str, ...]:
    if arch not in GENERATE_BY_DEFAULT:
        return ()
    return (f"vLLM maps {arch} to a generative class and runs it with the generate runner unless the checkpoint "
            "ships a Sentence-Transformers pooling config (modules.json); for an embedder pass --runner pooling "
            "(no sampler warm-up, no async scheduling)",)
