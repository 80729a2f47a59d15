"""Gemma-4 (gemma4 / gemma4_text): mixed head sizes, KV-shared layers, per-layer embeddings.

Differences from the plain decoder, from the config fields:
- sliding layers use ``head_dim`` and ``num_key_value_heads``; full (global) layers use
  ``global_head_dim`` and ``num_global_key_value_heads`` (falling back to the sliding values);
  with ``attention_k_eq_v`` the global layers have no v_proj (keys double as values);
- the last ``num_kv_shared_layers`` layers reuse an earlier layer's cache: no KV spec;
- ``hidden_size_per_layer_input`` > 0 adds per-layer embeddings of
  ``vocab_size_per_layer_input × num_layers × hidden_size_per_layer_input`` parameters;
- ``enable_moe_block`` runs experts alongside the dense MLP in every layer.
Page sizes, KV sharing and groups were checked against vLLM 0.32's own KV specs
(tests/data/oracle: gemma-4-26B-A4B TP2, gemma-4-E2B-it): k_eq_v layers still store K and V.
"""

from __future__ import annotations


from oomguard.model.architectures import register
from oomguard.model.architectures.builder import build_description
from oomguard.model.architectures.common import max_len_from_keys, need, rope_scaling
from oomguard.model.architectures.vision import vision_params
from oomguard.model.description import AttentionLayer, LayerKind, ModelDescription, MoE


@register("gemma4", "gemma4_text")
def describe_gemma4(config: dict, cfg: dict, *, source: str, name: str, hf_quant: dict | None) -> ModelDescription:
    mt = str(cfg.get("model_type"))
    hidden = int(need(cfg, "hidden_size", what="hidden size", model_type=mt))
    n = int(need(cfg, "num_hidden_layers", what="layer count", model_type=mt))
    heads = int(need(cfg, "num_attention_heads", what="attention heads", model_type=mt))
    kv = int(need(cfg, "num_key_value_heads", what="KV heads", model_type=mt))
    hd = int(need(cfg, "head_dim", what="head dim", model_type=mt))
    # transformers 5.19's Gemma4TextConfig pops global_head_dim (default 512) and writes it into
    # per_layer_config ({"05": {"head_dim": 512}}) for the full-attention layers, which vLLM's
    # gemma4.py reads per layer; a file may carry either form.
    per_layer = cfg.get("per_layer_config") if isinstance(cfg.get("per_layer_config"), dict) else {}
    full_override = next((v for v in per_layer.values() if isinstance(v, dict) and "head_dim" in v), {})
    ghd = int(cfg.get("global_head_dim") or full_override.get("head_dim") or (512 if per_layer or "global_head_dim" not in cfg else hd))
    gkv = int(cfg.get("num_global_key_value_heads") or full_override.get("num_key_value_heads") or kv)
    window = int(need(cfg, "sliding_window", what="sliding window", model_type=mt))
    types = cfg.get("layer_types") or []
    if len(types) < n:
        from oomguard.errors import UnsupportedModelError

        raise UnsupportedModelError(f"{source}: gemma4 config without layer_types for all {n} layers")
    shared_from = n - int(cfg.get("num_kv_shared_layers") or 0)
    k_eq_v = bool(cfg.get("attention_k_eq_v"))
    moe = None
    is_moe = bool(cfg.get("enable_moe_block")) and bool(cfg.get("num_experts"))
    if is_moe:
        moe = MoE(
            num_experts=int(cfg["num_experts"]),
            top_k=int(cfg.get("top_k_experts") or cfg.get("num_experts_per_tok") or 8),
            expert_intermediate_size=int(cfg.get("moe_intermediate_size") or cfg.get("expert_intermediate_size")),
            num_moe_layers=n,
            dense_intermediate_size=int(cfg.get("intermediate_size") or 0),
            dense_alongside=True,
        )
    layers = []
    for i, t in enumerate(types[:n]):
        shared = i >= shared_from
        if t == "sliding_attention":
            layer = AttentionLayer(LayerKind.SLIDING_WINDOW, kv, hd, hd, sliding_window=window, moe=is_moe, kv_shared=shared)
        else:
            layer = AttentionLayer(LayerKind.FULL, gkv, ghd, ghd, moe=is_moe, kv_shared=shared, k_eq_v=k_eq_v)
        if shared:
            layer = layer._replace(kind=LayerKind.NONE, kv_shared=True, mlp_multiplier=2 if cfg.get("use_double_wide_mlp") else 1)
        layers.append(layer)
    ple = int(cfg.get("hidden_size_per_layer_input") or 0)
    ple_params = int(cfg.get("vocab_size_per_layer_input") or 0) * n * ple if ple else 0
    inter = int(cfg.get("intermediate_size") or 0)
    rope = rope_scaling(cfg)
    base = max_len_from_keys(cfg)
    return build_description(
        config, cfg, name=name, source=source, model_type=mt, hf_quant=hf_quant, max_len=base, rope=rope,
        multimodal="vision_config" in config,
        family="gemma4",
        hidden_size=hidden,
        num_layers=n,
        num_attention_heads=heads,
        num_kv_heads=kv,
        head_size=hd,
        intermediate_size=inter,
        vocab_size=int(cfg["vocab_size"]),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", True)),
        layers=tuple(layers),
        moe=moe,
        # every tower the config holds, whether or not it names a vision_config
        vision_params=vision_params(config),
        per_layer_embed_params=ple_params,
    )
