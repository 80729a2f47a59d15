"""Weight bytes per rank, from the config (and scaled to safetensors totals when present).

vLLM's "Model loading took X GiB" is the torch memory allocated while building
the model and loading weights (docs/memory-model.md#weights). Per-rank numel follows the
parallel linear layers: column/row-parallel weights split by TP, KV projections
keep max(1, Hkv/TP) heads per rank, vocab padded to 64 and split by TP,
norms/routers replicated; PP puts the embedding on the first stage and the LM
head on the last; quantized bytes per parameter per method's ``create_weights``.
"""

from __future__ import annotations


from oomguard.model.architectures.common import pad_vocab
from oomguard.model.description import LayerKind, ModelDescription
from oomguard.model.quantization import WeightCosts
from oomguard.records import NamedTuple

class WeightSplit(NamedTuple):
    """Bytes on one rank, by part (for the ledger)."""

    embed_bytes: float
    lm_head_bytes: float
    layers_bytes: float
    vision_bytes: float
    mtp_bytes: float
    num_layers: int
    scale: float = 1.0  # safetensors total / config formula (1.0 when no checkpoint)

    @property
    def total_bytes(self) -> int:
        return int(self.embed_bytes + self.lm_head_bytes + self.layers_bytes + self.vision_bytes + self.mtp_bytes)


def pp_layer_ranges(num_layers: int, pp: int, partition: str | None = None) -> list[range]:
    """vLLM distributed/utils.py::get_pp_indices (>= 0.8.5): remainder goes to stages -2, -3, ..."""
    if partition:
        sizes = [int(x) for x in partition.split(",")]
    else:
        base = num_layers // pp
        sizes = [base] * pp
        rem = num_layers % pp
        i = pp - 2
        while rem > 0:
            sizes[i % pp] += 1
            rem -= 1
            i -= 1
    out, start = [], 0
    for s in sizes:
        out.append(range(start, start + s))
        start += s
    return out


def _attention_params(m: ModelDescription, layer_kind: LayerKind, tp: int, layer=None) -> float:
    H, D = m.hidden_size, m.head_size
    kv_heads = m.num_kv_heads
    if layer is not None and layer.head_size:
        D, kv_heads = layer.head_size, layer.num_kv_heads or kv_heads
    if layer_kind is LayerKind.MLA and m.mla:
        a = m.mla
        hq = m.num_attention_heads / tp
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        q = (H * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * hq * qk) if a.q_lora_rank else H * hq * qk
        kv = H * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank + a.kv_lora_rank * hq * (a.qk_nope_head_dim + a.v_head_dim)
        o = hq * a.v_head_dim * H
        return q + kv + o
    if layer_kind is LayerKind.MAMBA:
        layer = next(l for l in m.layers if l.kind is LayerKind.MAMBA)
        st = layer.mamba
        if st.variant in ("mamba1", "mamba2"):
            return _mamba_mixer_params(H, st, tp)
        nk_dk = st.n_groups * st.head_k_dim
        nv_dv = st.num_heads * st.head_v_dim
        in_proj = H * (2 * nk_dk + 2 * nv_dv + 2 * st.num_heads) / tp
        conv = st.conv_dim * st.conv_kernel / tp
        out = nv_dv / tp * H
        return in_proj + conv + out + 2 * st.num_heads / tp + st.head_v_dim
    hq = m.num_attention_heads / tp
    kv_rank = max(1, kv_heads // tp)
    gate = 2 if m.attn_output_gate else 1
    q = H * hq * D * gate
    kv = (1 if (layer is not None and layer.k_eq_v) else 2) * H * kv_rank * D
    o = hq * D * H
    bias = (hq * D + 2 * kv_rank * D) if m.qkv_bias else 0
    return q + kv + o + bias + 2 * D  # q/k norms where present (tiny)


def _mamba_mixer_params(H: int, st, tp: int) -> float:
    """Parameters of one Mamba mixer on one TP rank (layers/mamba/mamba_mixer.py, mamba_mixer2.py).

    Mamba2: in_proj H → (z, x, B, C, dt) = 2·I + 2·G′·N + heads (column-parallel, groups
    replicated per head shard as in the state), conv1d (I + 2·G′·N) × k + bias, dt_bias, A,
    D (heads each), the gated RMSNorm (I), out_proj I → H (row-parallel). Mamba1: in_proj
    H → 2·I, conv1d I × k + bias, x_proj I → dt_rank + 2·N, dt_proj dt_rank → I + bias,
    A (I × N), D (I), out_proj I → H; dt_rank = ceil(H / 16)."""
    I, N = st.conv_dim, st.state_size
    if st.variant == "mamba2":
        g = st.n_groups + (0 if st.n_groups % tp == 0 else tp - st.n_groups)
        conv_dim = I + 2 * g * N
        in_proj = H * (I + conv_dim + st.num_heads) / tp
        return in_proj + conv_dim * (st.conv_kernel + 1) / tp + 3 * st.num_heads / tp + I / tp + I * H / tp
    dt_rank = -(-H // 16)
    return (H * 2 * I + I * (st.conv_kernel + 1) + I * (dt_rank + 2 * N) + dt_rank * I + I + I * N + I + I * H) / tp


def _mlp_params(m: ModelDescription, is_moe: bool, tp: int, ep: int, mxfp4_backend: str | None = None) -> tuple[float, float, float, float]:
    """(dense mlp, experts, shared experts, router) parameters on one rank.

    ``mxfp4_backend``: the MXFP4 MoE kernel family (model/mxfp4.py); its padded expert sizes
    are what vLLM allocates. None keeps the checkpoint's layout (host copies, the
    safetensors scale)."""
    H = m.hidden_size
    mats = 3 if m.gated_mlp else 2  # gate_up + down, or up + down (relu2 / gelu MLPs)
    if not is_moe or m.moe is None:
        inter = m.moe.dense_intermediate_size if (m.moe and m.moe.dense_intermediate_size) else m.intermediate_size
        return mats * H * inter / tp, 0.0, 0.0, 0.0
    parallel_dense = 3 * H * m.moe.dense_intermediate_size / tp if m.moe.dense_alongside else 0.0
    e = m.moe
    ie = e.expert_intermediate_size
    split = 1 if ep > 1 else tp
    he = H
    if m.quantization.method == "mxfp4" and mxfp4_backend:
        from oomguard.model.mxfp4 import mxfp4_padded_sizes

        he, per = mxfp4_padded_sizes(mxfp4_backend, H, int(ie / split))
        ie = per * split
    if ep > 1:
        experts = (e.num_experts / ep) * mats * he * ie
    else:
        experts = e.num_experts * mats * he * ie / tp
    shared = mats * H * e.shared_intermediate_size / tp + (H if e.shared_intermediate_size else 0)
    router = e.num_experts * H
    return parallel_dense, experts, shared, router


def served_costs(costs: WeightCosts, checkpoint_bytes: int, served_bytes: int) -> WeightCosts:
    """Costs when vLLM casts the unquantized tensors to ``--dtype`` (quantized ones keep theirs)."""
    if served_bytes == checkpoint_bytes:
        return costs
    return WeightCosts({c: (float(served_bytes) if v == checkpoint_bytes else v) for c, v in costs.per_category.items()})


def explicit_layer_bytes(params: dict, costs: WeightCosts, tp: int, ep: int, b: int) -> float:
    """Bytes of one layer whose parameters the adapter counted (ModelDescription.layer_params):
    category -> [count at TP 1, split across TP ranks]. Experts split over the EP group when
    expert parallelism is on, else over TP (FusedMoE)."""
    per_cat = {"attn": "attn", "attn_replicated": "attn", "experts": "experts", "shared_experts": "shared_experts",
               "mlp": "mlp", "linear_attn": "linear_attn"}
    total = 0.0
    for cat, (count, split) in params.items():
        if not count:
            continue
        if cat == "experts":
            n = count / (ep if ep > 1 else tp)
        else:
            n = count / tp if split else count
        if cat in ("fp32", "int32", "attn_sink"):
            total += n * 4
        elif cat in per_cat:
            total += n * costs.bytes_per_param(per_cat[cat])
        else:  # router, norms, unquantized linears: the served dtype
            total += n * b
    return total


def layer_bytes(m: ModelDescription, index: int, costs: WeightCosts, tp: int, ep: int = 1, dtype_bytes: int | None = None,
                mxfp4_backend: str | None = None) -> float:
    if m.layer_params is not None:
        return explicit_layer_bytes(m.layer_params[index], costs, tp, ep, dtype_bytes or m.dtype_bytes)
    layer = m.layers[index]
    kind = layer.kind if layer.kind in (LayerKind.MLA, LayerKind.MAMBA) else LayerKind.FULL
    if layer.kind is LayerKind.NONE and not layer.kv_shared:
        attn = 0.0  # an MLP / MoE block without a mixer (NemotronH "-" / "E")
    else:
        attn = _attention_params(m, kind, tp, layer if kind is LayerKind.FULL else None)
    attn_cat = "linear_attn" if kind is LayerKind.MAMBA else "attn"
    dense, experts, shared, router = _mlp_params(m, layer.moe, tp, ep, mxfp4_backend)
    dense *= layer.mlp_multiplier
    b = dtype_bytes or m.dtype_bytes
    total = attn * costs.bytes_per_param(attn_cat)
    total += dense * costs.bytes_per_param("mlp") + experts * costs.bytes_per_param("experts")
    total += shared * costs.bytes_per_param("shared_experts") + router * b
    total += 2 * m.hidden_size * b  # input / post-attention norms
    return total


def weight_split(
    m: ModelDescription,
    costs: WeightCosts,
    *,
    tp: int = 1,
    pp: int = 1,
    pp_rank: int = 0,
    ep: int = 1,
    with_mtp: bool = False,
    pp_partition: str | None = None,
    dtype_bytes: int | None = None,
    mxfp4_backend: str | None = None,
) -> WeightSplit:
    """``dtype_bytes``: the element size vLLM serves in (``--dtype``), when not the checkpoint's;
    the safetensors scale is taken at the checkpoint's dtype and applied to the served sizes."""
    ckpt_costs = costs
    b = dtype_bytes or m.dtype_bytes
    costs = served_costs(costs, m.dtype_bytes, b)
    vocab_rows = pad_vocab(m.vocab_size) / tp
    text_layers = [i for i, l in enumerate(m.layers) if l.name != "indexer"][: m.num_layers]
    ranges = pp_layer_ranges(len(text_layers), pp, pp_partition)
    mine = ranges[pp_rank]
    first, last = pp_rank == 0, pp_rank == pp - 1
    embed = vocab_rows * m.hidden_size * costs.bytes_per_param("embed") if first else 0.0
    if first and m.per_layer_embed_params:
        embed += m.per_layer_embed_params / tp * costs.bytes_per_param("embed")
    lm_head = 0.0
    if last and (not m.tie_word_embeddings or pp > 1):
        lm_head = vocab_rows * m.hidden_size * costs.bytes_per_param("lm_head")
    layers = sum(layer_bytes(m, text_layers[i], costs, tp, ep, b, mxfp4_backend) for i in mine)
    if last:
        layers += m.hidden_size * b  # final norm
        if m.extra_params:
            layers += explicit_layer_bytes(m.extra_params, costs, tp, ep, b)
    vision = m.vision_params * b / tp if first else 0.0
    mtp = 0.0
    if with_mtp and last and m.num_mtp_layers:
        one = layer_bytes(m, text_layers[-1], costs, tp, ep, b, mxfp4_backend) + 2 * m.hidden_size * m.hidden_size * b / tp
        mtp = m.num_mtp_layers * one
    scale = 1.0
    if m.checkpoint_bytes:
        # Scale the per-rank structure so the whole model matches the checkpoint exactly.
        whole = weight_split_unscaled_total(m, ckpt_costs)
        groups = m.checkpoint_dtype_bytes or {}
        ckpt = m.checkpoint_bytes
        mtp_ck = groups.get("mtp")
        if mtp_ck:
            ckpt -= mtp_ck[0] * m.dtype_bytes + mtp_ck[1]
        if whole > 0:
            scale = ckpt / whole
    return WeightSplit(embed * scale, lm_head * scale, layers * scale, vision * scale, mtp * scale, len(mine), scale)


def weight_split_unscaled_total(m: ModelDescription, costs: WeightCosts) -> float:
    b = m.dtype_bytes
    v = m.vocab_size * m.hidden_size
    total = (v + m.per_layer_embed_params) * costs.bytes_per_param("embed")
    if not m.tie_word_embeddings:
        total += v * costs.bytes_per_param("lm_head")
    text_layers = [i for i, l in enumerate(m.layers) if l.name != "indexer"][: m.num_layers]
    total += sum(layer_bytes(m, i, costs, 1) for i in text_layers) + m.hidden_size * b
    if m.extra_params:
        total += explicit_layer_bytes(m.extra_params, costs, 1, 1, b)
    total += m.vision_params * b
    return total


def model_weight_bytes(m: ModelDescription, flags: dict | None = None) -> int:
    """Whole-model weight bytes as loaded (TP 1, checkpoint total when known).

    For host-RAM estimates (weights pass through host memory while loading).
    ``flags`` may carry ``quantization`` (online quantization changes the loaded size).
    """
    from oomguard.model.quantization import WeightCosts, override_quantization, weight_costs

    q = override_quantization(m.quantization, (flags or {}).get("quantization"))
    if q is m.quantization and m.category_bytes:
        costs = WeightCosts(dict(m.category_bytes))
    else:
        costs = weight_costs(q, m.dtype_bytes, {}, None)
    if m.checkpoint_bytes and q is m.quantization:
        return int(m.checkpoint_bytes)
    return int(weight_split(m, costs).total_bytes)
