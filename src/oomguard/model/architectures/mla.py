"""Multi-head latent attention models (DeepSeek V2/V3/R1, V3.2, Kimi-K2-style configs).

The KV cache stores one latent vector of ``kv_lora_rank + qk_rope_head_dim``
per token and layer, replicated on every TP rank (vLLM MLAAttentionSpec,
``max_tp_shards=1``). DeepSeek-V3.2 adds a sparse-attention indexer cache per
layer: fp8 keys of ``index_head_dim`` plus one fp32 scale per 128 values.
"""

from __future__ import annotations

from oomguard.model.architectures import register
from oomguard.model.architectures.builder import build_description
from oomguard.model.architectures.common import max_len_from_keys, need, rope_scaling
from oomguard.model.architectures.vision import TOWER_KEYS
from oomguard.model.description import MLA, AttentionLayer, LayerKind, ModelDescription, MoE


@register("deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2")
def describe_mla(config: dict, cfg: dict, *, source: str, name: str, hf_quant: dict | None) -> ModelDescription:
    mt = str(cfg.get("model_type"))
    hidden = int(need(cfg, "hidden_size", what="hidden size", model_type=mt))
    n = int(need(cfg, "num_hidden_layers", what="layer count", model_type=mt))
    heads = int(need(cfg, "num_attention_heads", what="attention heads", model_type=mt))
    kv_lora = int(need(cfg, "kv_lora_rank", what="MLA latent rank", model_type=mt))
    rope_d = int(need(cfg, "qk_rope_head_dim", what="MLA rope head dim", model_type=mt))
    nope_d = int(need(cfg, "qk_nope_head_dim", what="MLA nope head dim", model_type=mt))
    v_d = int(need(cfg, "v_head_dim", what="MLA value head dim", model_type=mt))
    vocab = int(need(cfg, "vocab_size", what="vocabulary size", model_type=mt))
    experts = int(cfg.get("n_routed_experts") or 0)
    first_dense = int(cfg.get("first_k_dense_replace") or 0)
    freq = int(cfg.get("moe_layer_freq") or 1)
    is_moe = [bool(experts) and i >= first_dense and i % freq == 0 for i in range(n)]
    moe = None
    if experts:
        ei = int(cfg["moe_intermediate_size"])
        moe = MoE(
            num_experts=experts,
            top_k=int(cfg.get("num_experts_per_tok") or 8),
            expert_intermediate_size=ei,
            shared_intermediate_size=int(cfg.get("n_shared_experts") or 0) * ei,
            num_moe_layers=sum(is_moe),
            num_dense_layers=n - sum(is_moe),
            dense_intermediate_size=int(cfg.get("intermediate_size") or 0),
        )
    latent = kv_lora + rope_d
    layers: list[AttentionLayer] = []
    for i in range(n):
        layers.append(AttentionLayer(LayerKind.MLA, 1, latent, 0, moe=is_moe[i]))
    if mt == "deepseek_v32" and cfg.get("index_head_dim"):
        d = int(cfg["index_head_dim"])
        # fp8 keys + one fp32 scale per 128-value block (vLLM DeepseekV32IndexerCache).
        idx = d + d // 128 * 4
        for _ in range(n):
            layers.append(AttentionLayer(LayerKind.MLA, 1, idx, 0, fixed_dtype_bytes=1, name="indexer"))
    rope = rope_scaling(cfg)
    base = max_len_from_keys(cfg)
    mm = any(k in config for k in TOWER_KEYS)
    # multimodal: a DeepSeek-V2/V3 language model inside a VLM wrapper (Kimi-VL's MoonViT, DeepSeek-VL2)
    return build_description(
        config, cfg, name=name, source=source, model_type=mt, hf_quant=hf_quant, max_len=base, rope=rope, multimodal=mm,
        family="mla",
        hidden_size=hidden,
        num_layers=n,
        num_attention_heads=heads,
        num_kv_heads=1,
        head_size=latent,
        intermediate_size=int(cfg.get("intermediate_size") or 0),
        vocab_size=vocab,
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        layers=tuple(layers),
        moe=moe,
        mla=MLA(kv_lora, rope_d, nope_d, v_d, int(cfg["q_lora_rank"]) if cfg.get("q_lora_rank") else None),
        num_mtp_layers=int(cfg.get("num_nextn_predict_layers") or 0),
    )
