"""Mamba state-space models and their attention hybrids.

Derived from vLLM 0.32's model files and checked against vLLM's own KV specs on the CPU build
(scripts/vllm_kv_oracle.py): mamba.py (Mamba1), mamba2.py (Mamba2), jamba.py (Mamba1 +
attention + MoE every ``expert_layer_period``), granitemoehybrid.py (Mamba2 + attention, MoE
and/or shared MLP in every layer), nemotron_h.py (one block per layer: ``M`` Mamba2, ``*``
attention, ``-`` MLP, ``E`` MoE, from ``hybrid_override_pattern``).

State per layer and TP rank (model_executor/layers/mamba/mamba_utils.py, MambaStateShapeCalculator):

- Mamba1: conv ``(conv_kernel − 1) × I/TP`` + SSM ``I/TP × d_state``;
- Mamba2: conv ``(conv_kernel − 1 + num_spec) × (I + 2·G′·d_state)/TP`` with the groups
  extended to cover the head shards (``G′ = G + TP − G`` when TP does not divide G), + SSM
  ``heads/TP × head_dim × d_state``.

The conv state is stored in the model dtype; the SSM state in ``mamba_ssm_cache_dtype``
(NemotronH defaults it to float32: model_executor/models/config.py::NemotronHForCausalLMConfig;
the others to the conv dtype). Prefix caching puts hybrids in "align" mode (one more state block
per request, engine.py::mamba_blocks_per_request).

Falcon-H1 (falcon_h1.py::FalconH1ParallelHybrid): every decoder layer runs attention and a Mamba2
mixer side by side on the same normed input, then one gated MLP. vLLM registers the two as
separate cache layers (the mixer's prefix index is ``num_hidden_layers + i``), so the description
holds 2·n entries, attention (with the layer's MLP) and Mamba2 (no MLP) interleaved; KV groups,
pages and the hybrid block size then follow the common rules. Mamba2 inner size ``mamba_d_ssm``
or ``mamba_expand × hidden``.

Zamba2 (zamba2.py): every layer is a Mamba2 decoder layer; the ``hybrid`` ones (``layers_block_type``)
also run one of ``num_mem_blocks`` shared transformer blocks (attention over the 2·H concatenation of
the hidden state and the embeddings, a GELU-gated MLP) whose weights are shared but whose KV cache
is one per hybrid layer, plus a per-layer H × H ``linear`` and LoRA adapters (``adapter_rank``) on the
MLP and, with ``use_shared_attention_adapter``, on q/k/v. The description: n Mamba2 layers (weights
by the layer formula), then one full-attention cache entry per hybrid layer after them (beyond
``num_layers``, so the shared weights are counted once, in ``extra_params``).
"""

from __future__ import annotations

from oomguard.errors import UnsupportedModelError
from oomguard.model.architectures import register
from oomguard.model.architectures.builder import build_description
from oomguard.model.architectures.common import (
    head_size,
    max_len_from_keys,
    model_dtype,
    need,
    num_kv_heads,
    rope_scaling,
)
from oomguard.model.description import DTYPE_BYTES, AttentionLayer, LayerKind, MambaState, ModelDescription, MoE

# Legacy layer-type names (configs saved before transformers 5) -> the names vLLM 0.32 keys on.
_LAYER_NAMES = {"mamba": "linear_attention", "attention": "full_attention"}


def _ssm_bytes(cfg: dict, model_b: int, default: str | None) -> int:
    name = str(cfg.get("mamba_ssm_cache_dtype") or default or "")
    return DTYPE_BYTES.get(name, model_b)


def _kinds(cfg: dict, mt: str, n: int) -> list[str]:
    """Per-layer block kind: "mamba", "attention", "mlp" or "moe"."""
    if mt == "nemotron_h":
        pattern = cfg.get("hybrid_override_pattern")
        if not isinstance(pattern, str) or not pattern:
            lt = cfg.get("layers_block_type") or cfg.get("layer_types")
            if isinstance(lt, list) and lt:
                names = {"linear_attention": "mamba", "mamba": "mamba", "full_attention": "attention", "attention": "attention",
                         "mlp": "mlp", "moe": "moe"}
                return [names.get(str(x), "?") for x in lt]
            raise UnsupportedModelError(f"model_type {mt!r}: config has no hybrid_override_pattern")
        code = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
        out = [code.get(c, "?") for c in pattern]
        if "?" in out:
            raise UnsupportedModelError(f"model_type {mt!r}: hybrid_override_pattern {pattern!r} has a block vLLM 0.32 does not build")
        return out
    if mt == "jamba":
        period = int(cfg.get("attn_layer_period") or 8)
        offset = int(cfg.get("attn_layer_offset") or 4)
        return ["attention" if i % period == offset else "mamba" for i in range(n)]
    if mt in ("mamba", "mamba2", "falcon_mamba"):
        return ["mamba"] * n
    if mt == "falcon_h1":
        return ["attention", "mamba"] * n
    if mt == "zamba2":
        return ["mamba"] * n
    lt = cfg.get("layer_types") or cfg.get("layers_block_type")
    if isinstance(lt, list) and len(lt) >= n:
        return ["attention" if _LAYER_NAMES.get(str(x), str(x)) == "full_attention" else "mamba" for x in lt[:n]]
    return ["mamba"] * n


def _state(cfg: dict, mt: str, dtype: str) -> MambaState:
    H = int(need(cfg, "hidden_size", "d_model", what="hidden size", model_type=mt))
    model_b = DTYPE_BYTES[dtype]
    if mt in ("mamba", "falcon_mamba", "jamba"):
        if mt == "jamba":
            inter = int(cfg.get("mamba_expand") or 2) * H
            d_state, kernel = int(cfg.get("mamba_d_state") or 16), int(cfg.get("mamba_d_conv") or 4)
        else:
            inter = int(cfg.get("intermediate_size") or int(cfg.get("expand") or 2) * H)
            d_state, kernel = int(cfg.get("state_size") or 16), int(cfg.get("conv_kernel") or 4)
        return MambaState("mamba1", conv_dim=inter, conv_kernel=kernel, num_heads=0, head_k_dim=0, head_v_dim=0,
                          state_size=d_state, conv_dtype_bytes=model_b, ssm_dtype_bytes=_ssm_bytes(cfg, model_b, None))
    if mt == "nemotron_h":
        heads, hd = int(need(cfg, "mamba_num_heads", what="Mamba heads", model_type=mt)), int(need(cfg, "mamba_head_dim", what="Mamba head dim", model_type=mt))
        inter, groups = heads * hd, int(cfg.get("n_groups") or 1)
        d_state, kernel = int(need(cfg, "ssm_state_size", what="SSM state size", model_type=mt)), int(cfg.get("conv_kernel") or 4)
        ssm_default = "float32"
    elif mt == "mamba2":
        inter = int(cfg.get("intermediate_size") or int(cfg.get("expand") or 2) * H)
        heads, hd = int(need(cfg, "num_heads", what="Mamba heads", model_type=mt)), int(need(cfg, "head_dim", what="Mamba head dim", model_type=mt))
        groups, d_state, kernel = int(cfg.get("n_groups") or 1), int(cfg.get("state_size") or 128), int(cfg.get("conv_kernel") or 4)
        ssm_default = None
    elif mt == "zamba2":
        inter = int(cfg.get("mamba_expand") or 2) * H
        heads = int(need(cfg, "n_mamba_heads", what="Mamba heads", model_type=mt))
        hd = int(cfg.get("mamba_headdim") or inter // heads)
        groups, d_state, kernel = int(cfg.get("mamba_ngroups") or 1), int(cfg.get("mamba_d_state") or 64), int(cfg.get("mamba_d_conv") or 4)
        ssm_default = None
    elif mt == "falcon_h1":
        d_ssm = cfg.get("mamba_d_ssm")
        inter = int(d_ssm) if isinstance(d_ssm, int) and d_ssm > 0 else int(float(cfg.get("mamba_expand") or 2) * H)
        heads = int(need(cfg, "mamba_n_heads", what="Mamba heads", model_type=mt))
        hd_raw = cfg.get("mamba_d_head")
        hd = int(hd_raw) if isinstance(hd_raw, int) and hd_raw > 0 else inter // heads
        groups, d_state, kernel = int(cfg.get("mamba_n_groups") or 1), int(cfg.get("mamba_d_state") or 256), int(cfg.get("mamba_d_conv") or 4)
        ssm_default = None
    else:  # granitemoehybrid
        inter = int(cfg.get("mamba_expand") or 2) * H
        heads = int(need(cfg, "mamba_n_heads", what="Mamba heads", model_type=mt))
        hd_raw = cfg.get("mamba_d_head")
        hd = int(hd_raw) if isinstance(hd_raw, int) else inter // heads
        groups, d_state, kernel = int(cfg.get("mamba_n_groups") or 1), int(cfg.get("mamba_d_state") or 256), int(cfg.get("mamba_d_conv") or 4)
        ssm_default = None
    return MambaState("mamba2", conv_dim=inter, conv_kernel=kernel, num_heads=heads, head_k_dim=0, head_v_dim=hd,
                      n_groups=groups, state_size=d_state, conv_dtype_bytes=model_b,
                      ssm_dtype_bytes=_ssm_bytes(cfg, model_b, ssm_default))


def _moe(cfg: dict, mt: str, kinds: list[str], n: int) -> tuple[MoE | None, list[bool]]:
    H_i = int(cfg.get("intermediate_size") or 0) if not isinstance(cfg.get("intermediate_size"), list) else int(cfg["intermediate_size"][0])
    if mt == "nemotron_h":
        is_moe = [k == "moe" for k in kinds]
        if not any(is_moe):
            return None, is_moe
        ei = int(need(cfg, "moe_intermediate_size", what="expert intermediate size", model_type=mt))
        return MoE(int(need(cfg, "n_routed_experts", what="routed experts", model_type=mt)), int(cfg.get("num_experts_per_tok") or 1), ei,
                   int(cfg.get("moe_shared_expert_intermediate_size") or 0) * max(1, int(cfg.get("n_shared_experts") or 1))
                   if cfg.get("n_shared_experts") else 0,
                   num_moe_layers=sum(is_moe), num_dense_layers=sum(k == "mlp" for k in kinds), dense_intermediate_size=H_i), is_moe
    if mt == "jamba":
        e = int(cfg.get("num_experts") or 1)
        period, offset = int(cfg.get("expert_layer_period") or 2), int(cfg.get("expert_layer_offset") or 1)
        is_moe = [e > 1 and i % period == offset for i in range(n)]
        if not any(is_moe):
            return None, is_moe
        return MoE(e, int(cfg.get("num_experts_per_tok") or 2), H_i, 0, num_moe_layers=sum(is_moe),
                   num_dense_layers=n - sum(is_moe), dense_intermediate_size=H_i), is_moe
    if mt == "granitemoehybrid" and int(cfg.get("num_local_experts") or 0) > 0:
        shared = int(cfg.get("shared_intermediate_size") or 0)
        return MoE(int(cfg["num_local_experts"]), int(cfg.get("num_experts_per_tok") or 1), H_i, shared,
                   num_moe_layers=n, num_dense_layers=0, dense_intermediate_size=0), [True] * n
    return None, [False] * n


@register("mamba", "falcon_mamba", "mamba2", "jamba", "granitemoehybrid", "nemotron_h", "falcon_h1", "zamba2")
def describe_mamba(config: dict, cfg: dict, *, source: str, name: str, hf_quant: dict | None) -> ModelDescription:
    mt = str(cfg.get("model_type") or config.get("model_type"))
    hidden = int(need(cfg, "hidden_size", "d_model", what="hidden size", model_type=mt))
    kinds_probe = _kinds(cfg, mt, int(cfg.get("num_hidden_layers") or cfg.get("n_layer") or 0))
    n = len(kinds_probe) if mt == "nemotron_h" else int(need(cfg, "num_hidden_layers", "n_layer", what="layer count", model_type=mt))
    kinds = _kinds(cfg, mt, n)
    if mt == "falcon_h1":
        n = len(kinds)  # one attention and one Mamba2 cache layer per decoder layer
    vocab = int(need(cfg, "vocab_size", what="vocabulary size", model_type=mt))
    dtype = model_dtype(config, cfg)
    st = _state(cfg, mt, dtype)
    attn_layers = [i for i, k in enumerate(kinds) if k == "attention"]
    heads = int(cfg.get("num_attention_heads") or 1)
    kv = num_kv_heads(cfg, heads)
    hd = int(cfg.get("attention_head_dim") or 0) or head_size(cfg, hidden, heads)
    moe, is_moe = _moe(cfg, mt, kinds, n)
    # Which layers run an MLP after their mixer: Jamba and Granite every layer; NemotronH only
    # its "-" / "E" blocks; Falcon-H1 once per decoder layer (counted on its attention entry);
    # pure Mamba none.
    mlp_after = {"jamba": True, "granitemoehybrid": True}.get(mt, False)
    parallel = mt == "falcon_h1"
    window = cfg.get("sliding_window")
    layers = []
    for i, k in enumerate(kinds):
        if k == "mamba":
            layer = AttentionLayer(LayerKind.MAMBA, mamba=st, moe=is_moe[i], mlp_multiplier=1 if mlp_after else 0,
                                   index=n // 2 + i // 2 if parallel else None)
        elif k == "attention":
            kind = LayerKind.SLIDING_WINDOW if window else LayerKind.FULL
            layer = AttentionLayer(kind, kv, hd, hd, sliding_window=int(window) if window else None, moe=is_moe[i],
                                   mlp_multiplier=1 if (mlp_after or parallel) else 0, index=i // 2 if parallel else None)
        else:  # an MLP or MoE block alone (NemotronH)
            layer = AttentionLayer(LayerKind.NONE, moe=k == "moe", mlp_multiplier=1 if k == "mlp" else 0)
        layers.append(layer)
    extra = None
    if mt == "zamba2":
        shared_layers, extra = _zamba2_shared(cfg, hidden, n)
        layers += shared_layers
        attn_layers = list(range(n, n + len(shared_layers)))
    rope = rope_scaling(cfg)
    base = max_len_from_keys(cfg)
    inter = cfg.get("intermediate_size")
    inter = int(inter[0] if isinstance(inter, list) else (inter or 0))
    ungated = str(cfg.get("mlp_hidden_act") or "") == "relu2"
    return build_description(
        config, cfg, name=name, source=source, model_type=mt, hf_quant=hf_quant, max_len=base, rope=rope,
        family="hybrid-mamba" if attn_layers else "mamba",
        hidden_size=hidden,
        num_layers=n,
        num_attention_heads=heads,
        num_kv_heads=kv,
        head_size=hd,
        intermediate_size=inter,
        vocab_size=vocab,
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", config.get("tie_word_embeddings", mt in ("mamba", "mamba2")))),
        layers=tuple(layers),
        moe=moe,
        qkv_bias=bool(cfg.get("attention_bias")),
        gated_mlp=not ungated,
        attention_free=mt in ("mamba", "mamba2", "falcon_mamba"),
        extra_params=extra,
    )


def _zamba2_shared(cfg: dict, H: int, n: int) -> tuple[list[AttentionLayer], dict]:
    """Zamba2's hybrid layers: one full-attention cache each, and the shared blocks' parameters."""
    mt = "zamba2"
    types = cfg.get("layers_block_type") or []
    hybrid = [i for i, t in enumerate(types[:n]) if str(t) == "hybrid"]
    if not hybrid:
        hybrid = [int(i) for i in cfg.get("hybrid_layer_ids") or [] if int(i) < n]
    heads = int(need(cfg, "num_attention_heads", what="attention heads", model_type=mt))
    A = int(cfg.get("attention_hidden_size") or 2 * H)
    hd = int(cfg.get("attention_head_dim") or A // heads)
    inter = int(need(cfg, "intermediate_size", what="MLP width", model_type=mt))
    r = int(cfg.get("adapter_rank") or 128)
    blocks = int(cfg.get("num_mem_blocks") or 1)
    bias = bool(cfg.get("add_bias_linear"))
    # per shared block: RMSNorm(2H), qkv (2H -> 3 x A), o (A -> H), pre-FF norm, gate_up (H -> 2I), down (I -> H)
    block = 2 * H + A * 3 * A + A * H + H + H * 2 * inter + inter * H + (2 * inter + H) * bias
    # per hybrid layer: the H x H linear, the gate_up LoRA and, when on, the q/k/v LoRAs
    per_hybrid = H * H + (H * r + r * 2 * inter) + (3 * (A * r + r * A) if cfg.get("use_shared_attention_adapter") else 0)
    layers = [AttentionLayer(LayerKind.FULL, heads, hd, hd, mlp_multiplier=0, index=n + k) for k in range(len(hybrid))]
    # the Mamba layers carry one RMSNorm, the layer formula two: n x H fewer
    return layers, {"unquantized": [blocks * block + len(hybrid) * per_hybrid - n * H, True]}
