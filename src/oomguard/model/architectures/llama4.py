"""Llama-4 (Scout / Maverick): chunked local attention, interleaved MoE with a shared expert.

From vLLM 0.32's model_executor/models/llama4.py, checked against vLLM's KV specs on the CPU
build (scripts/vllm_kv_oracle.py):

- layer ``i`` uses RoPE with chunked local attention (ChunkedLocalAttentionSpec, chunk
  ``attention_chunk_size``) when ``no_rope_layers[i] == 1``, else global full attention without
  RoPE (NoPE); a config without ``no_rope_layers`` gets transformers' default
  ``[(i + 1) % no_rope_layer_interval != 0]`` (interval 4: every fourth layer global);
- layer ``i`` is MoE when ``(i + 1) % interleave_moe_layer_step == 0``: ``num_local_experts``
  routed experts of ``intermediate_size`` plus one shared expert of the same size; the other
  layers run a dense MLP of ``intermediate_size_mlp`` (Maverick alternates, Scout is all MoE);
- q/k RMSNorm on the RoPE layers only (``use_qk_norm``).

The vision tower (``vision_config``) counts in the weights as the generic ViT estimate
(architectures/vision.py); its encoder profile uses the generic image item.
"""

from __future__ import annotations

from oomguard.model.architectures import register
from oomguard.model.architectures.builder import build_description
from oomguard.model.architectures.common import head_size, max_len_from_keys, need, num_kv_heads, rope_scaling
from oomguard.model.description import AttentionLayer, LayerKind, ModelDescription, MoE


def no_rope_layers(cfg: dict, n: int) -> list[int]:
    nr = cfg.get("no_rope_layers")
    if isinstance(nr, list) and len(nr) >= n:
        return [int(x) for x in nr[:n]]
    interval = int(cfg.get("no_rope_layer_interval") or 4)
    return [int((i + 1) % interval != 0) for i in range(n)]


@register("llama4", "llama4_text")
def describe_llama4(config: dict, cfg: dict, *, source: str, name: str, hf_quant: dict | None) -> ModelDescription:
    mt = str(cfg.get("model_type") or config.get("model_type"))
    hidden = int(need(cfg, "hidden_size", what="hidden size", model_type=mt))
    n = int(need(cfg, "num_hidden_layers", what="layer count", model_type=mt))
    heads = int(need(cfg, "num_attention_heads", what="attention heads", model_type=mt))
    kv = num_kv_heads(cfg, heads)
    hd = head_size(cfg, hidden, heads)
    vocab = int(need(cfg, "vocab_size", what="vocabulary size", model_type=mt))
    chunk = cfg.get("attention_chunk_size")
    rope_layers = no_rope_layers(cfg, n)
    step = int(cfg.get("interleave_moe_layer_step") or 1)
    experts = int(cfg.get("num_local_experts") or 0)
    is_moe = [experts > 0 and step > 0 and (i + 1) % step == 0 for i in range(n)]
    ie = int(need(cfg, "intermediate_size", what="expert intermediate size", model_type=mt))
    dense_i = int(cfg.get("intermediate_size_mlp") or ie)
    moe = None
    if any(is_moe):
        moe = MoE(experts, int(cfg.get("num_experts_per_tok") or 1), ie, shared_intermediate_size=ie,
                  num_moe_layers=sum(is_moe), num_dense_layers=n - sum(is_moe), dense_intermediate_size=dense_i)
    layers = []
    for i in range(n):
        if rope_layers[i] and chunk:
            layers.append(AttentionLayer(LayerKind.CHUNKED_LOCAL, kv, hd, hd, chunk_size=int(chunk), moe=is_moe[i]))
        else:
            layers.append(AttentionLayer(LayerKind.FULL, kv, hd, hd, moe=is_moe[i]))
    rope = rope_scaling(cfg)
    base = max_len_from_keys(cfg)
    is_mm = "vision_config" in config or config.get("model_type") == "llama4"
    return build_description(
        config, cfg, name=name, source=source, model_type=mt, hf_quant=hf_quant, max_len=base, rope=rope, multimodal=is_mm,
        family="llama4",
        hidden_size=hidden,
        num_layers=n,
        num_attention_heads=heads,
        num_kv_heads=kv,
        head_size=hd,
        intermediate_size=dense_i,
        vocab_size=vocab,
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", config.get("tie_word_embeddings", False))),
        layers=tuple(layers),
        moe=moe,
        qkv_bias=bool(cfg.get("attention_bias")),
    )
