"""DeepSeek-V4 (Flash / Pro): compressed and indexed MLA caches in packed KV groups.

Derived from vLLM 0.32's model files (models/deepseek_v4/attention.py, compressor.py,
v1/attention/backends/mla/sparse_swa.py, cpu/model.py, quant_config.py) and checked against
vLLM's own spec code on the CPU build (scripts/vllm_kv_oracle.py, tests/unit/test_kv_oracle.py).

Per decoder layer ``i`` with ``ratio = compress_ratios[i]`` (0 and 1 mean "no compression"):

- every layer: a sliding-window cache of ``sliding_window`` tokens (DeepseekV4SWACache:
  SlidingWindowMLASpec, block 64, one 512-wide latent per token);
- ratio 4 or 128: the attention's own compressed cache (MLAAttentionSpec, block 256 (the
  DSv4 sparse-MLA kernels take only 256), ``tokens_per_state = ratio``: one latent per
  ``ratio`` tokens) and its compressor's state (CompressorStateCache: fp32
  ``2·coff·head_dim`` per token, ``coff = 2`` for ratio 4 (overlapping windows) else 1, a
  window of ``coff·ratio`` tokens, block 4 (ratio 4) or 8 (ratio 128));
- ratio 4 only (the sparse "C4A" layers): the lightning indexer's key cache (fp8 keys of
  ``index_head_dim`` + one fp32 scale per 128, block 256, one per 4 tokens) and the
  indexer compressor's state (fp32 ``2·2·index_head_dim``, window 8, block 4).

Every cache is one vector per state, replicated on all TP ranks (``max_tp_shards=1``). On the
default CUDA backends (and on the CPU build) the attention caches use the packed fp8_ds_mla
format: 584 bytes per state, pages rounded up to 576 B; a block-outermost layout packs the
differently sized pages side by side (kv_spec.packed_kv_layout).

MTP layers (``num_nextn_predict_layers``) add caches only with speculative decoding; the plan
does not model DeepSeek-V4 MTP caches (said in the notes).
"""

from __future__ import annotations

from oomguard.errors import UnsupportedModelError
from oomguard.model.architectures import register
from oomguard.model.architectures.builder import build_description
from oomguard.model.architectures.common import max_len_from_keys, need, rope_scaling
from oomguard.model.description import AttentionLayer, LayerKind, ModelDescription, MoE

SWA_BLOCK = 64  # DeepseekV4SWACache(block_size=64)
SPARSE_MLA_BLOCK = 256  # DeepseekV4SparseMLABackend.get_supported_kernel_block_sizes -> [256]
FP8_DS_MLA_STATE_BYTES = 584  # 448 NoPE fp8 + 64 RoPE bf16 (128 B) + 8 scale bytes
PACKED_ALIGN, PLAIN_ALIGN = 576, 512  # alignment=576 if fp8_ds_mla else 512
INDEXER_QUANT_BLOCK = 128  # DeepseekV4Indexer.quant_block_size: one fp32 scale per 128 fp8


def _caches(cfg: dict, n: int, ratios: list[int]) -> tuple[list[AttentionLayer], list[AttentionLayer]]:
    hd = int(need(cfg, "head_dim", what="latent head dim", model_type="deepseek_v4"))
    window = int(need(cfg, "sliding_window", what="sliding window", model_type="deepseek_v4"))
    ihd = int(cfg.get("index_head_dim") or 128)
    own: list[AttentionLayer] = []
    aux: list[AttentionLayer] = []

    def cache(kind, head, block, *, tps=1, window_=None, packed=None, dtype=None, name="", index=0):
        return AttentionLayer(kind, 1, head, 0, sliding_window=window_, fixed_dtype_bytes=dtype, name=name,
                              block_size=block, tokens_per_state=tps, packed_state_bytes=packed,
                              page_alignment_packed=PACKED_ALIGN, page_alignment_plain=PLAIN_ALIGN, index=index)

    for i in range(n):
        ratio = max(1, int(ratios[i]))
        if ratio not in (1, 4, 128):
            raise UnsupportedModelError(f"DeepSeek-V4 compress_ratio {ratios[i]} at layer {i} is not one vLLM 0.32 builds (1, 4, 128)")
        # Registration order of vLLM's static forward context: indexer caches first (built
        # inside the attention before its SWA cache), then SWA, the attention, its compressor.
        if ratio == 4:
            aux.append(cache(LayerKind.MLA, ihd + ihd // INDEXER_QUANT_BLOCK * 4, SPARSE_MLA_BLOCK, tps=4, dtype=1,
                             name="indexer_k", index=i))
            aux.append(cache(LayerKind.SLIDING_WINDOW, 2 * 2 * ihd, 4, window_=8, dtype=4, name="indexer_state", index=i))
        aux.append(cache(LayerKind.SLIDING_WINDOW, hd, SWA_BLOCK, window_=window, packed=FP8_DS_MLA_STATE_BYTES,
                         name="swa", index=i))
        if ratio == 1:
            own.append(AttentionLayer(LayerKind.NONE, 1, hd, 0, moe=True, name="swa_only"))
            continue
        own.append(cache(LayerKind.MLA, hd, SPARSE_MLA_BLOCK, tps=ratio, packed=FP8_DS_MLA_STATE_BYTES, name="compressed",
                         index=i))
        own[-1] = _with_moe(own[-1])
        coff = 2 if ratio == 4 else 1
        aux.append(cache(LayerKind.SLIDING_WINDOW, 2 * coff * hd, 4 if ratio == 4 else 8, window_=coff * ratio, dtype=4,
                         name=f"compressor_state_c{ratio}", index=i))
    return own, aux


def _with_moe(layer: AttentionLayer) -> AttentionLayer:

    return layer._replace(moe=True)


def _layer_params(cfg: dict, ratios: list[int], n: int) -> tuple[tuple[dict, ...], dict]:
    """Parameters of each decoder layer, from the modules vLLM builds (cpu/model.py,
    attention.py, compressor.py): category -> [count at TP 1, split across TP ranks?].
    ``fp32`` holds the float32 parameters no quantization touches (hyper-connection mixers,
    attention sinks, compressor position biases, router bias), ``int32`` the hash-routing
    table of the first ``num_hash_layers`` layers."""
    H = int(cfg["hidden_size"])
    heads = int(cfg["num_attention_heads"])
    hd = int(cfg["head_dim"])
    ql = int(cfg["q_lora_rank"])
    ol = int(cfg["o_lora_rank"])
    og = int(cfg["o_groups"])
    ih, ihd = int(cfg.get("index_n_heads") or 64), int(cfg.get("index_head_dim") or 128)
    E, ie = int(cfg["n_routed_experts"]), int(cfg["moe_intermediate_size"])
    shared = int(cfg.get("n_shared_experts") or 0) * ie
    hc = int(cfg.get("hc_mult") or 4)
    V, topk = int(cfg["vocab_size"]), int(cfg["num_experts_per_tok"])
    hash_layers = int(cfg.get("num_hash_layers") or 0)
    mix = (2 + hc) * hc
    out = []
    for i in range(n):
        ratio = max(1, int(ratios[i]))
        # Quantized linears (the checkpoint's quant_config): wq_b, wo_a, wo_b split by TP;
        # fused_wqa_wkv (disable_tp) and the indexer's wq_b (ReplicatedLinear) replicated.
        attn_tp = ql * heads * hd + (heads * hd // og) * og * ol + og * ol * H
        attn_rep = H * (ql + hd) + (ql * ih * ihd if ratio == 4 else 0)
        # Built with quant_config=None or as norms, in the model dtype: q_norm, kv_norm, the
        # compressors' fused_wkv_wgate (disable_tp) and norm, the indexer's weights_proj,
        # attn_norm and ffn_norm.
        unq = ql + hd + 2 * H
        fp32 = 2 * (mix * hc * H + mix + 3)  # hc_attn / hc_ffn: fn, base, scale
        if ratio > 1:
            coff = 2 if ratio == 4 else 1
            unq += H * 2 * coff * hd + hd
            fp32 += ratio * coff * hd  # compressor ape
        if ratio == 4:
            unq += H * ih + H * 2 * 2 * ihd + ihd
            fp32 += 4 * 2 * ihd
        layer = {
            "attn": [attn_tp, True],
            "attn_sink": [heads, True],  # fp32, the rank's heads (padded to the kernel's on CUDA)
            "attn_replicated": [attn_rep, False],
            "unquantized": [unq, False],
            "experts": [E * 3 * H * ie, True],
            "shared_experts": [3 * H * shared, True],
            "router": [E * H, False],
            # hash layers route by token id (tid2eid int32 table); the others carry the fp32
            # e_score_correction_bias (topk_method noaux_tc)
            "fp32": [fp32 + (0 if i < hash_layers else E), False],
            "int32": [V * topk if i < hash_layers else 0, False],
        }
        out.append(layer)
    # hc_head fn, base, scale; and the two rotary cos/sin caches (fp32 buffers, allocated with
    # the weights, so inside "Model loading took"): the sliding-window RoPE over
    # max_position_embeddings and the compressed layers' YaRN over original × factor positions,
    # rope_dim wide each (common/rope.py -> get_rope; 512 MiB for both V4 checkpoints, as the
    # oracle measured).
    rope_d = int(cfg.get("qk_rope_head_dim") or 64)
    rs = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    max_pos = int(cfg.get("max_position_embeddings") or 0)
    yarn_pos = int(float(rs.get("original_max_position_embeddings") or max_pos) * float(rs.get("factor") or 1)) if rs else max_pos
    extra = {"fp32": [hc * hc * H + hc + 1 + rope_d * (max_pos + yarn_pos), False]}
    return tuple(out), extra


@register("deepseek_v4", "deepseek_ref")
def describe_deepseek_v4(config: dict, cfg: dict, *, source: str, name: str, hf_quant: dict | None) -> ModelDescription:
    mt = str(cfg.get("model_type"))
    hidden = int(need(cfg, "hidden_size", what="hidden size", model_type=mt))
    n = int(need(cfg, "num_hidden_layers", what="layer count", model_type=mt))
    heads = int(need(cfg, "num_attention_heads", what="attention heads", model_type=mt))
    vocab = int(need(cfg, "vocab_size", what="vocabulary size", model_type=mt))
    for f in ("q_lora_rank", "o_lora_rank", "o_groups", "n_routed_experts", "moe_intermediate_size", "num_experts_per_tok"):
        need(cfg, f, what=f, model_type=mt)
    ratios = cfg.get("compress_ratios")
    if not isinstance(ratios, list) or len(ratios) < n:
        raise UnsupportedModelError(f"{source}: DeepSeek-V4 config needs compress_ratios for all {n} layers")
    own, aux = _caches(cfg, n, ratios)
    layer_params, extra = _layer_params(cfg, ratios, n)
    ei = int(cfg["moe_intermediate_size"])
    moe = MoE(
        num_experts=int(cfg["n_routed_experts"]),
        top_k=int(cfg["num_experts_per_tok"]),
        expert_intermediate_size=ei,
        shared_intermediate_size=int(cfg.get("n_shared_experts") or 0) * ei,
        num_moe_layers=n,
        num_dense_layers=0,
    )
    rope = rope_scaling(cfg)
    base = max_len_from_keys(cfg)
    notes = ("not modelled: DeepSeek-V4 with speculative decoding: the MTP / dspark draft layers' caches "
             "and weights are not in the plan",)
    return build_description(
        config, cfg, name=name, source=source, model_type=mt, hf_quant=hf_quant, max_len=base, rope=rope,
        family="deepseek-v4",
        hidden_size=hidden,
        num_layers=n,
        num_attention_heads=heads,
        num_kv_heads=1,
        head_size=int(cfg["head_dim"]),
        intermediate_size=0,
        vocab_size=vocab,
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        layers=tuple(own),
        moe=moe,
        num_mtp_layers=int(cfg.get("num_nextn_predict_layers") or 0),
        aux_caches=tuple(aux),
        kv_block_outermost=True,
        layer_params=layer_params,
        extra_params=extra,
        notes=notes,
    )
