"""The generic path: a plan from the standard config fields, for a model_type no adapter is checked on.

vLLM serves ~390 architectures; oomguard's adapters are checked against vLLM's code for a few dozen
``model_type``s. For any other config that still reads as a decoder-only transformer (hidden size,
layers, heads, vocabulary; optional KV heads, head dim, intermediate size, experts, sliding window,
latent attention) this builds the description a Llama-shaped model with those fields would have,
and says so: ``coverage = "generic"``, the assumptions it made listed one by one, and the plan
carries the mark and a range on each estimate (model/coverage.py; the ranges are the distances
the registry sweep measured between this path and vLLM, docs/models.md).

A bidirectional encoder (BERT-style: vLLM serves it as a pooling model and keeps no KV cache) gets
the same reading without a KV cache (``_generic_encoder``). What it will not guess (refused with the
reason, exit 3): encoder-decoder models (cross-attention caches sized by the encoder), state-space
/ Mamba layers and linear attention without Gated
DeltaNet fields (their state is not a per-token KV cache), per-layer size lists, and configs
missing one of the four standard sizes.
"""

from __future__ import annotations

from oomguard.errors import UnsupportedModelError
from oomguard.model.architectures.builder import build_description
from oomguard.model.architectures.common import (
    KV_HEAD_FIELDS,
    head_size,
    max_len_from_keys,
    model_dtype,
    num_kv_heads,
    rope_scaling,
)
from oomguard.model.description import AttentionLayer, LayerKind, ModelDescription, MoE

MARK = "generic: {model_type} is not checked against vLLM's code for this architecture"

HIDDEN = ("hidden_size", "n_embd", "d_model", "dim")
LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
HEADS = ("num_attention_heads", "n_head", "n_heads", "num_heads")
INTERMEDIATE = ("intermediate_size", "ffn_dim", "ffn_hidden_size", "n_inner", "d_ff", "hidden_dim")
EXPERTS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
TOP_K = ("num_experts_per_tok", "experts_per_token", "moe_topk", "top_k_experts", "moe_k")
SHARED = ("n_shared_experts", "num_shared_experts", "moe_num_shared_experts")
# Non-gated MLPs (two matrices): the GPT-2 / OPT / Falcon / BLOOM lineage. Gemma's GeGLU uses
# gelu_pytorch_tanh and is gated, so only these names count.
NON_GATED_ACTS = {"gelu", "gelu_new", "relu", "gelu_fast", "gelu_python", "quick_gelu", "gelu_10", "relu2", "xielu",
                  "squared_relu", "relu_squared"}
# Two-matrix MLPs whose activation name is also used gated elsewhere (gelu_pytorch_tanh is
# Gemma's GeGLU): models/gpt_bigcode.py builds c_fc / c_proj.
UNGATED_MODEL_TYPES = {"gpt_bigcode"}
# A learned position table (wpe, a replicated embedding) outside the layers: models/gpt2.py,
# gpt_bigcode.py.
LEARNED_POSITIONS = {"gpt2", "gpt_bigcode"}
# model_types whose latent-attention fields vLLM reads as MLA (one latent per token and layer):
# transformers_utils/model_arch_config_convertor.py::is_deepseek_mla @0.32. Other configs with
# kv_lora_rank (MiniCPM3) project through a latent but cache full per-head K and V.
VLLM_MLA_MODEL_TYPES = {
    "axk1", "deepseek_v2", "deepseek_v3", "deepseek_v32", "deepseek_v4", "deepseek_v41", "dots3_note", "deepseek_mtp",
    "k3_dspark", "glm5_next", "glm5_next_text", "glm_moe_dsa", "glm4_moe_lite", "glm4_moe_lite_mtp", "kimi_k2",
    "kimi_linear", "longcat_flash", "pangu_ultra_moe", "pangu_ultra_moe_mtp", "bailing_hybrid", "bailing_hybrid_mtp",
    "bailing_hybrid_v3_mtp", "hy_v4", "hy_v4_mtp",
}
# Bidirectional encoders vLLM runs as pooling models with no KV cache (BERT, RoBERTa, XLM-R,
# ModernBERT, NomicBERT, GTE, CLIP/SigLIP towers): marked by token-type embeddings or their
# global/local attention schedule, or named by their model_type.
ENCODER_ONLY_TYPES = {"bert", "roberta", "xlm-roberta", "modernbert", "nomic_bert", "new", "gte", "siglip", "clip",
                      "siglip_text_model", "clip_text_model", "distilbert", "electra", "deberta", "deberta-v2",
                      "camembert", "mpnet", "ernie"}
# Fields that mean layers keep a recurrent state instead of (or besides) a KV cache.
STATE_FIELDS = ("state_size", "ssm_state_size", "mamba_d_state", "mamba_n_heads", "mamba_expand",
                "attn_layer_period", "layers_block_type", "hybrid_override_pattern", "ssm_cfg", "mamba_d_conv")
ENCODER_DECODER_FIELDS = ("encoder_layers", "num_decoder_layers", "decoder_layers")
# Sub-dicts some configs keep standard sizes in (DBRX: ffn_config.moe_num_experts / ffn_hidden_size,
# attn_config.kv_n_heads).
NESTED_BLOCKS = ("ffn_config", "attn_config")
LAYER_KINDS = {
    "full_attention": LayerKind.FULL,
    "attention": LayerKind.FULL,
    "global": LayerKind.FULL,
    "sliding_attention": LayerKind.SLIDING_WINDOW,
    "sliding_window": LayerKind.SLIDING_WINDOW,
    "local": LayerKind.SLIDING_WINDOW,
    "chunked_attention": LayerKind.CHUNKED_LOCAL,
    # DSA-style sparse attention (GLM-5, HY-V4, Qwen4-Exp): full attention plus an indexer
    "indexed_attention": LayerKind.FULL,
}


def _first(cfg: dict, names: tuple[str, ...]):
    for n in names:
        v = cfg.get(n)
        if v is not None:
            return n, v
    return None, None


def _int(cfg: dict, names: tuple[str, ...], what: str, mt: str) -> tuple[str, int]:
    name, v = _first(cfg, names)
    if v is None:
        raise UnsupportedModelError(f"model_type {mt!r}: {MARK.format(model_type=mt).split(': ', 1)[1]}, and its config "
                                    f"has none of {', '.join(names)} ({what}): the generic path needs the standard sizes")
    if isinstance(v, list):
        raise UnsupportedModelError(f"model_type {mt!r}: {name} is a per-layer list; the generic path models uniform layers only")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or int(v) != v or v <= 0:
        raise UnsupportedModelError(f"model_type {mt!r}: {name} = {v!r} is not a positive size")
    return name, int(v)


def refusal(config: dict, cfg: dict, mt: str) -> str | None:
    """Why the generic path will not model this config (None: it will)."""
    if config.get("is_encoder_decoder") or cfg.get("is_encoder_decoder") or any(cfg.get(k) for k in ENCODER_DECODER_FIELDS):
        return "an encoder-decoder model (cross-attention caches sized by the encoder) is not modelled by the generic path"
    lists = [k for k in (*HIDDEN, *LAYERS, *HEADS, *KV_HEAD_FIELDS, "head_dim")
             if isinstance(cfg.get(k), list)]
    if lists:
        return f"{lists[0]} is a per-layer list; the generic path models uniform layers only"
    state = [k for k in STATE_FIELDS if cfg.get(k) not in (None, [], "", 0)]
    if state:
        return (f"state-space (Mamba-style) layers ({', '.join(state[:3])}) keep a recurrent state, not a per-token KV cache: "
                "not modelled by the generic path")
    types = cfg.get("layer_types")
    if isinstance(types, list):
        odd = sorted({str(t) for t in types} - set(LAYER_KINDS) - {"linear_attention"})
        if odd:
            return f"layer types {', '.join(odd)} are not standard attention: not modelled by the generic path"
        if "linear_attention" in {str(t) for t in types} and not (cfg.get("linear_num_value_heads") or cfg.get("linear_num_heads")):
            return "linear-attention layers without Gated DeltaNet fields are not modelled by the generic path"
    return None


def bidirectional_encoder(config: dict, cfg: dict, mt: str) -> bool:
    """A BERT-style encoder: named by its model_type, or marked by token-type embeddings or
    ``is_causal: false``. (A global/local attention schedule alone is no mark: Afmoe decoders
    carry ``global_attn_every_n_layers`` as ModernBERT does.)"""
    top = str(config.get("model_type") or "")
    return bool(mt in ENCODER_ONLY_TYPES or top in ENCODER_ONLY_TYPES or cfg.get("type_vocab_size")
                or cfg.get("is_causal") is False)


def describe_generic(config: dict, cfg: dict, *, source: str, name: str, hf_quant: dict | None) -> ModelDescription:
    mt = str(cfg.get("model_type") or config.get("model_type") or "")
    why = refusal(config, cfg, mt)
    if why:
        raise UnsupportedModelError(f"{source}: model_type {mt or '(missing)'!r}: {why}")
    if bidirectional_encoder(config, cfg, mt):
        return _generic_encoder(config, cfg, source=source, name=name, hf_quant=hf_quant, mt=mt)
    nested = [k for k in NESTED_BLOCKS if isinstance(cfg.get(k), dict)]
    if nested:
        # DBRX-style configs keep the MLP / attention sizes in sub-dicts: read them as if top-level
        # (a top-level field wins), and say so
        cfg = {**{f: v for k in nested for f, v in cfg[k].items() if f != "model_type"}, **cfg}
    latent = bool(cfg.get("kv_lora_rank") and cfg.get("qk_rope_head_dim"))
    if latent and mt in VLLM_MLA_MODEL_TYPES:
        return _generic_mla(config, cfg, source=source, name=name, hf_quant=hf_quant, mt=mt)
    assumptions: list[str] = [f"sizes read from {', '.join(nested)} as top-level fields"] if nested else []
    hk, hidden = _int(cfg, HIDDEN, "hidden size", mt)
    lk, n = _int(cfg, LAYERS, "layer count", mt)
    qk, heads = _int(cfg, HEADS, "attention heads", mt)
    _, vocab = _int(cfg, ("vocab_size", "padded_vocab_size"), "vocabulary size", mt)
    # Falcon / GPT-BigCode multi-query: one KV head unless Falcon's new decoder architecture
    # (model_arch_config_convertor.py::FalconModelArchConfigConvertor @0.32).
    if cfg.get("multi_query") and not cfg.get("new_decoder_architecture"):
        kv = 1
    elif cfg.get("multi_query_attention") is False:
        # ChatGLM: multi_query_group_num counts only with multi_query_attention on (models/chatglm.py
        # GLMAttention: total_num_kv_heads = heads otherwise; the sweep's cache pages agree)
        kv = heads
    else:
        kv = num_kv_heads(cfg, heads)
    hd = head_size(cfg, hidden, heads) if not cfg.get("kv_channels") else int(cfg["kv_channels"])
    hd_v = hd
    if latent:  # a latent projection that still caches full per-head K and V (MiniCPM3)
        kv = heads
        hd = int(cfg["qk_rope_head_dim"]) + int(cfg.get("qk_nope_head_dim") or 0)
        hd_v = int(cfg.get("v_head_dim") or hd)
        assumptions.append(f"kv_lora_rank without MLA in vLLM for {mt!r}: full K ({hd}) and V ({hd_v}) cached per head")
    assumptions.append(f"attention: {heads} query heads, {kv} KV heads of size {hd} on every layer "
                       f"({'from head_dim' if cfg.get('head_dim') else 'hidden / heads'}), K and V both cached")
    ik, inter = _first(cfg, INTERMEDIATE)
    if inter is None:
        inter = 4 * hidden
        assumptions.append(f"MLP width: none of {', '.join(INTERMEDIATE)}; 4 × hidden = {inter} assumed")
    if isinstance(inter, list):
        # per-layer widths (Gemma-3n): their mean gives the layers' MLP parameters exactly
        widths = [int(x) for x in inter[:n]] or [4 * hidden]
        inter = round(sum(widths) / len(widths))
        assumptions.append(f"{ik} per layer ({min(widths)}-{max(widths)}): their mean {inter} used for every layer")
    inter = int(inter)
    act = str(cfg.get("hidden_act") or cfg.get("hidden_activation") or cfg.get("activation_function")
              or cfg.get("activation") or "silu")
    gated = act not in NON_GATED_ACTS and mt not in UNGATED_MODEL_TYPES
    assumptions.append(f"MLP: {'gated, 3' if gated else 'not gated (' + act + '), 2'} matrices of {hidden} × {inter}")
    layers_kind = _layer_kinds(cfg, n, assumptions)
    moe, is_moe = _moe(cfg, n, inter, assumptions)
    window = cfg.get("sliding_window")
    chunk = cfg.get("attention_chunk_size")
    layers = []
    for i, kind in enumerate(layers_kind):
        if kind is LayerKind.SLIDING_WINDOW:
            layers.append(AttentionLayer(kind, kv, hd, hd_v, sliding_window=int(window), moe=is_moe[i]))
        elif kind is LayerKind.CHUNKED_LOCAL:
            layers.append(AttentionLayer(kind, kv, hd, hd_v, chunk_size=int(chunk or 8192), moe=is_moe[i]))
        elif kind is LayerKind.MAMBA:
            from oomguard.model.architectures.decoder import _gdn_state

            layers.append(AttentionLayer(LayerKind.MAMBA, mamba=_gdn_state(cfg, mt, model_dtype(config, cfg)), moe=is_moe[i]))
        else:
            layers.append(AttentionLayer(LayerKind.FULL, kv, hd, hd_v, moe=is_moe[i]))
    shared = int(cfg.get("num_kv_shared_layers") or 0)
    if 0 < shared < n:
        # the last num_kv_shared_layers reuse an earlier layer's cache (Gemma-3n / Gemma-4 YOCO)
        layers = [l._replace(kv_shared=True) if i >= n - shared else l for i, l in enumerate(layers)]
        assumptions.append(f"the last {shared} layers reuse earlier layers' KV caches (num_kv_shared_layers)")
    ple = int(cfg.get("hidden_size_per_layer_input") or 0)
    ple_params = int(cfg.get("vocab_size_per_layer_input") or 0) * n * ple if ple else 0
    if ple_params:
        assumptions.append(f"per-layer input embeddings: {int(cfg.get('vocab_size_per_layer_input') or 0)} × {n} × {ple}; "
                           "their projections and the model's other per-layer extras not counted")
    tie_raw = cfg.get("tie_word_embeddings", config.get("tie_word_embeddings"))
    if tie_raw is None:
        assumptions.append("tie_word_embeddings not stated: PreTrainedConfig's default (tied) assumed")
    tie = True if tie_raw is None else bool(tie_raw)
    bias = bool(cfg.get("attention_bias") or cfg.get("qkv_bias") or cfg.get("bias") or cfg.get("use_bias"))
    vision = "vision_config" in config or "audio_config" in config
    if vision:
        assumptions.append("vision/audio tower: ViT-style parameter estimate (depth × (4·h² + 2·h·i)); encoder profile not modelled")
    assumptions.append("norms, rotary caches and biases as in a Llama layer; no extra projections")
    extra = None
    if mt in LEARNED_POSITIONS:
        rows = int(cfg.get("n_positions") or cfg.get("max_position_embeddings") or 0)
        extra = {"unquantized": [rows * hidden, False]}
        assumptions.append(f"learned absolute positions: {rows} × {hidden}")
    rope = rope_scaling(cfg)
    base = max_len_from_keys(cfg)
    return build_description(
        config, cfg, name=name, source=source, model_type=mt, hf_quant=hf_quant, max_len=base, rope=rope, multimodal=vision,
        family="generic",
        hidden_size=hidden,
        num_layers=n,
        num_attention_heads=heads,
        num_kv_heads=kv,
        head_size=hd,
        intermediate_size=inter if gated else inter * 2 // 3,
        vocab_size=vocab,
        tie_word_embeddings=tie,
        layers=tuple(layers),
        moe=moe,
        qkv_bias=bias,
        num_mtp_layers=int(cfg.get("num_nextn_predict_layers") or cfg.get("mtp_num_hidden_layers") or 0),
        coverage="generic",
        assumptions=tuple(assumptions),
        extra_params=extra,
        per_layer_embed_params=ple_params,
    )


def _layer_kinds(cfg: dict, n: int, assumptions: list[str]) -> list[LayerKind]:
    types = cfg.get("layer_types")
    window = cfg.get("sliding_window")
    if isinstance(types, list) and len(types) >= n:
        kinds = [LAYER_KINDS.get(str(t), LayerKind.MAMBA) for t in types[:n]]
        if LayerKind.SLIDING_WINDOW in kinds and not window:
            kinds = [LayerKind.FULL if k is LayerKind.SLIDING_WINDOW else k for k in kinds]
            assumptions.append("sliding layers without a sliding_window size: treated as full attention")
        assumptions.append("layer kinds from layer_types")
        if "indexed_attention" in {str(t) for t in types}:
            assumptions.append("indexed (sparse) attention layers: full attention; the indexer's own cache not modelled")
        return kinds
    interval = cfg.get("full_attention_interval")
    if isinstance(interval, int) and interval > 0 and cfg.get("linear_num_value_heads"):
        assumptions.append(f"Gated DeltaNet layers with full attention every {interval} layers (full_attention_interval)")
        return [LayerKind.FULL if (i + 1) % interval == 0 else LayerKind.MAMBA for i in range(n)]
    if isinstance(window, int) and window > 0 and cfg.get("use_sliding_window", True) is not False:
        assumptions.append(f"sliding_window {window} with no layer_types: every layer slides")
        return [LayerKind.SLIDING_WINDOW] * n
    return [LayerKind.FULL] * n


def _moe(cfg: dict, n: int, inter: int, assumptions: list[str]) -> tuple[MoE | None, list[bool]]:
    _, experts = _first(cfg, EXPERTS)
    ei_raw = cfg.get("moe_intermediate_size") or cfg.get("expert_intermediate_size")
    if isinstance(experts, list) or isinstance(ei_raw, list):
        # per-modality experts (ERNIE-4.5-VL: [text, vision]): the text experts, first
        experts = experts[0] if isinstance(experts, list) and experts else experts
        ei_raw = ei_raw[0] if isinstance(ei_raw, list) and ei_raw else ei_raw
        assumptions.append("expert lists (per modality): the first entry (the text experts) only")
    if not experts or isinstance(experts, list) or int(experts) <= 1:
        return None, [False] * n
    _, top_k = _first(cfg, TOP_K)
    if top_k is None:
        top_k = 2
        assumptions.append("experts per token not stated: 2 assumed")
    ei = int(ei_raw or inter)
    shared = int(cfg.get("shared_expert_intermediate_size") or 0)
    _, n_shared = _first(cfg, SHARED)
    if not shared and n_shared:
        shared = int(n_shared) * ei
    first_dense = int(cfg.get("first_k_dense_replace") or 0)
    only_mlp = set(cfg.get("mlp_only_layers") or [])
    step = int(cfg.get("decoder_sparse_step") or cfg.get("interleave_moe_layer_step") or cfg.get("moe_layer_freq") or 1)
    is_moe = [i >= first_dense and i not in only_mlp and (i + 1) % step == 0 for i in range(n)]
    mlp_types = cfg.get("mlp_layer_types")
    if isinstance(mlp_types, list) and len(mlp_types) >= n:
        is_moe = [str(t) in ("sparse", "moe") for t in mlp_types[:n]]
    assumptions.append(f"experts: {int(experts)} of width {ei}, top-{int(top_k)}"
                       + (f", shared {shared}" if shared else "")
                       + f", on {sum(is_moe)} of {n} layers (first_k_dense_replace / mlp_only_layers / sparse step)")
    moe = MoE(num_experts=int(experts), top_k=int(top_k), expert_intermediate_size=ei, shared_intermediate_size=shared,
              num_moe_layers=sum(is_moe), num_dense_layers=n - sum(is_moe), dense_intermediate_size=inter)
    return moe, is_moe


def _generic_mla(config: dict, cfg: dict, *, source: str, name: str, hf_quant: dict | None, mt: str) -> ModelDescription:
    """Latent-attention fields: the DeepSeek-V2/V3 adapter's reading, marked generic."""

    from oomguard.model.architectures.mla import describe_mla

    cfg = dict(cfg)
    cfg.setdefault("model_type", mt)
    extra_assumptions = []
    # the DeepSeek field names the MLA reading takes, from their common aliases (Kimi-Linear:
    # num_experts / num_experts_per_token / num_shared_experts / mlp_layer_types)
    for ds, alias in (("n_routed_experts", "num_experts"), ("num_experts_per_tok", "num_experts_per_token"),
                      ("n_shared_experts", "num_shared_experts")):
        if cfg.get(ds) is None and cfg.get(alias) is not None:
            cfg[ds] = cfg[alias]
    mlp_types = cfg.get("mlp_layer_types")
    if cfg.get("first_k_dense_replace") is None and isinstance(mlp_types, list) and "sparse" in mlp_types:
        cfg["first_k_dense_replace"] = [str(t) for t in mlp_types].index("sparse")
    linear = [i for i, t in enumerate(cfg.get("layer_types") or []) if str(t) == "linear_attention"]
    if linear and cfg.get("linear_num_heads") and not cfg.get("linear_num_value_heads"):
        # KDA (Kimi-Linear): one head count and size for q, k and v; its state is GDN-shaped
        # (MambaStateShapeCalculator.kda_state_shape: conv over v + 2·k, recurrent heads × d × d)
        for f in ("linear_num_key_heads", "linear_num_value_heads"):
            cfg[f] = cfg["linear_num_heads"]
        for f in ("linear_key_head_dim", "linear_value_head_dim"):
            cfg[f] = cfg.get("linear_head_dim") or cfg.get("head_dim")
    # DSA sparse attention (GLM-5 / HY-V4 "indexed_attention" layers with an index_head_dim): the
    # DeepSeek-V3.2 indexer cache per layer
    dsa = bool(cfg.get("index_head_dim")) and "indexed_attention" in {str(t) for t in cfg.get("layer_types") or []}
    if dsa:
        cfg["model_type"] = "deepseek_v32"
    desc = describe_mla(config, cfg, source=source, name=name, hf_quant=hf_quant)
    if linear and cfg.get("linear_num_value_heads"):
        from oomguard.model.architectures.decoder import _gdn_state

        state = _gdn_state(cfg, mt, desc.dtype)
        layers = list(desc.layers)
        for i in (i for i in linear if i < desc.num_layers):
            layers[i] = AttentionLayer(LayerKind.MAMBA, mamba=state, moe=layers[i].moe)
        desc = desc._replace(layers=tuple(layers))
        extra_assumptions.append(f"{len(linear)} linear-attention layers (layer_types) keep a Gated-DeltaNet-shaped "
                                 "state; their projections counted as GDN's")
    assumptions = (
        "latent attention read as DeepSeek-V2/V3 MLA: one kv_lora_rank + qk_rope_head_dim latent per token and layer",
        "experts as DeepSeek-V3 (n_routed_experts, first_k_dense_replace, moe_layer_freq)",
        ("an indexer cache per layer as DeepSeek-V3.2's (fp8 keys of index_head_dim + one fp32 scale per 128); "
         "shared indexers (indexer_types) not modelled") if dsa else "no sparse-attention indexer cache",
        *extra_assumptions,
    )
    return desc._replace(family="generic", coverage="generic", assumptions=assumptions, model_type=mt)


def _generic_encoder(config: dict, cfg: dict, *, source: str, name: str, hf_quant: dict | None, mt: str) -> ModelDescription:
    """A bidirectional encoder from the standard fields: no KV cache, the pooling runner."""
    hk, hidden = _int(cfg, HIDDEN, "hidden size", mt)
    _, n = _int(cfg, LAYERS, "layer count", mt)
    _, heads = _int(cfg, HEADS, "attention heads", mt)
    _, vocab = _int(cfg, ("vocab_size", "padded_vocab_size"), "vocabulary size", mt)
    assumptions = ["bidirectional encoder: vLLM runs it with the pooling runner and keeps no KV cache"]
    _, inter = _first(cfg, INTERMEDIATE)
    if inter is None:
        inter = 4 * hidden
        assumptions.append(f"MLP width: none of {', '.join(INTERMEDIATE)}; 4 × hidden = {inter} assumed")
    inter = int(inter)
    act = str(cfg.get("hidden_act") or cfg.get("hidden_activation") or cfg.get("activation_function") or "gelu")
    gated = act not in NON_GATED_ACTS
    assumptions.append(f"MLP: {'gated, 3' if gated else 'not gated (' + act + '), 2'} matrices of {hidden} × {inter}; "
                       f"attention: {heads} heads of {hidden // heads} on every layer")
    rope = any(k in cfg for k in ("rope_theta", "rope_parameters", "rotary_emb_base", "rope_scaling"))
    max_pos = int(cfg.get("max_position_embeddings") or 512)
    types = int(cfg.get("type_vocab_size") or 0)
    extra = types * hidden
    if not rope:
        extra += max_pos * hidden
        assumptions.append(f"learned absolute positions: {max_pos} × {hidden} (no rotary fields)")
    if types:
        assumptions.append(f"token-type embeddings: {types} × {hidden}")
    assumptions.append("no pooler or classifier head beyond the layers; biases not counted")
    layers = tuple(AttentionLayer(LayerKind.NONE, heads, hidden // heads, hidden // heads, kv_shared=True) for _ in range(n))
    vision = "vision_config" in config
    if vision:
        assumptions.append("vision tower: ViT-style parameter estimate (depth × (4·h² + 2·h·i))")
    return build_description(
        config, cfg, name=name, source=source, model_type=mt, hf_quant=hf_quant, max_len=max_pos, rope=None, multimodal=vision,
        family="generic",
        hidden_size=hidden,
        num_layers=n,
        num_attention_heads=heads,
        num_kv_heads=heads,
        head_size=hidden // heads,
        intermediate_size=inter,
        vocab_size=vocab,
        tie_word_embeddings=True,
        layers=layers,
        derived_max_model_len=max_pos,
        gated_mlp=gated,
        pooling=True,
        coverage="generic",
        assumptions=tuple(assumptions),
        extra_params={"unquantized": [extra, False]} if extra else None,
    )
