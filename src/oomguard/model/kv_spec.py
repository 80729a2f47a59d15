"""KV cache specs per layer, grouping, block size, blocks per request.

Mirrors vLLM's ``v1/kv_cache_interface.py`` and ``v1/core/kv_cache_utils.py``
(``kv_cache_planning.py`` in 0.33): per-layer page sizes, the hybrid
block-size alignment for Mamba/GDN models, the layer grouping of the hybrid
allocator, ``bytes_per_block``, and ``max_memory_usage_bytes`` per request.
See docs/memory-model.md#kv-cache.
"""

from __future__ import annotations


from oomguard.errors import InputError
from oomguard.model.description import AttentionLayer, LayerKind, ModelDescription
from oomguard.records import NamedTuple
from oomguard.units import cdiv

DEFAULT_BLOCK_SIZE = 16
FP8_DS_MLA_BYTES_PER_TOKEN = 656  # opaque fp8_ds_mla layout (vLLM FlashMLA sparse)

_KV_DTYPE_BYTES = {
    "auto": None,
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
    "float32": 4,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "fp8_ds_mla": 1,
    "int8": 1,
}


class LayerKVSpec(NamedTuple):
    """One layer's cache spec on one rank (vLLM's KVCacheSpec, flattened)."""

    layer_index: int
    kind: str  # LayerKind value
    block_size: int
    num_kv_heads: int  # per rank
    head_size: int
    dtype_bytes: int
    page_size_bytes: int
    sliding_window: int | None = None
    chunk_size: int | None = None
    real_page_size_bytes: int = 0  # before Mamba padding
    name: str = ""
    packed: bool = False  # lives in a block-outermost (packed) KV layout


def kv_dtype_bytes(kv_cache_dtype: str | None, model: ModelDescription, served_bytes: int | None = None) -> int:
    """``served_bytes``: the element size of the dtype vLLM serves in (EngineSettings.act_dtype_bytes);
    ``auto`` follows it (config/cache.py: the cache dtype defaults to the model dtype)."""
    name = (kv_cache_dtype or "auto").lower()
    if name not in _KV_DTYPE_BYTES:
        raise InputError(f"--kv-cache-dtype {kv_cache_dtype!r} is not modelled; use auto, bfloat16, float16, fp8, fp8_e4m3 or fp8_e5m2")
    b = _KV_DTYPE_BYTES[name]
    if b is None:
        if served_bytes:
            return served_bytes
        # 'auto' stores the model dtype; fp32 checkpoints run in 16 bits under --dtype auto.
        return 2 if model.dtype in ("bfloat16", "float16", "float32") else model.dtype_bytes
    return b


def kv_heads_per_rank(total_kv_heads: int, tp: int) -> int:
    """vLLM ModelConfig.get_num_kv_heads: heads are replicated when TP > KV heads."""
    return max(1, total_kv_heads // tp)


def mamba_page_bytes(layer: AttentionLayer, tp: int, num_spec: int = 0) -> int:
    st = layer.mamba
    assert st is not None
    if st.variant == "gdn":
        conv = (st.conv_kernel - 1 + num_spec) * (st.conv_dim // tp) * st.conv_dtype_bytes
        ssm = (st.num_heads // tp) * st.head_k_dim * st.head_v_dim * st.ssm_dtype_bytes
        return conv + ssm
    if st.variant == "mamba2":
        # mamba_utils.py::mamba2_state_shape: the groups a head shard needs are replicated
        # (extra_groups_for_head_shards), conv over x, B and C; SSM (heads, head_dim, d_state).
        groups = st.n_groups + (0 if st.n_groups % tp == 0 else tp - st.n_groups)
        conv_dim = st.conv_dim + 2 * groups * st.state_size
        conv = (st.conv_kernel - 1 + num_spec) * (conv_dim // tp) * st.conv_dtype_bytes
        ssm = (st.num_heads // tp) * st.head_v_dim * st.state_size * st.ssm_dtype_bytes
        return conv + ssm
    if st.variant == "mamba1":
        # mamba_utils.py::mamba1_state_shape: conv (I/TP, k−1), SSM (I/TP, d_state); no spec slots.
        inner = st.conv_dim // tp
        return (st.conv_kernel - 1) * inner * st.conv_dtype_bytes + inner * st.state_size * st.ssm_dtype_bytes
    raise InputError(f"Mamba variant {st.variant!r} is not modelled")


def _attn_page_per_token(layer: AttentionLayer, tp: int, s: int, kv_cache_dtype: str | None) -> tuple[int, int]:
    """(bytes per token per layer on one rank, heads per rank)."""
    if layer.kind is LayerKind.MLA:
        if layer.fixed_dtype_bytes is not None:
            return layer.head_size * layer.fixed_dtype_bytes, 1
        if (kv_cache_dtype or "") == "fp8_ds_mla":
            return FP8_DS_MLA_BYTES_PER_TOKEN, 1
        return layer.head_size * s, 1
    heads = kv_heads_per_rank(layer.num_kv_heads, tp)
    return heads * (layer.head_size + (layer.head_size_v or layer.head_size)) * s, heads


def is_attention_free(model: ModelDescription) -> bool:
    """ModelConfig.is_attention_free: a property of the architecture class (IsAttentionFree: Mamba,
    Mamba2, FalconMamba), not of the layer mix: a hybrid cut to Mamba layers only (the registry
    sweep's variant) stays hybrid for vLLM, with prefix caching and attention-sized blocks."""
    return model.attention_free


def hybrid_block_size(model: ModelDescription, tp: int, s: int, kv_cache_dtype: str | None, block_size: int, num_spec: int = 0) -> int:
    """Attention block size raised so one attention page >= the Mamba page (v1/attention/backends/utils.py, config/vllm.py hybrid block size)."""
    attn = next((l for l in model.layers if l.kind not in (LayerKind.MAMBA, LayerKind.NONE)), None)
    mamba = next((l for l in model.layers if l.kind is LayerKind.MAMBA), None)
    if attn is None or mamba is None:
        return block_size
    a, _ = _attn_page_per_token(attn, tp, s, kv_cache_dtype)
    m = mamba_page_bytes(mamba, tp, num_spec)
    k = max(DEFAULT_BLOCK_SIZE, block_size)
    return k * cdiv(m, k * a)


# FlashMLA's kernel block (v1/attention/backends/mla/flashmla.py), the default target's (sm90).
FLASHMLA_BLOCK_SIZE = 64


def backend_block_size(model: ModelDescription, kv_cache_dtype: str | None, mla_fp8_block_size: int | None = FLASHMLA_BLOCK_SIZE,
                       platform_block_size: int | None = None) -> int:
    """The block size the attention backend prefers when --block-size is not set (the backend's get_supported_kernel_block_sizes).

    MLA with an fp8 KV cache runs on FlashMLA (FLASH_ATTN_MLA rejects fp8) where the target has it
    (the GPU catalog's ``mla_fp8_block_size``: 64 on sm90/sm10x, verified against vLLM 0.32's backend
    selection for sm90; none on sm12x and ROCm, whose Triton MLA keeps 16). A platform whose
    attention backend prefers another block (``platform_block_size``: Gaudi's 128) sets it;
    everything else keeps the default 16 (ROCm's ROCM_ATTN takes any multiple of 16).
    """
    is_mla = any(l.kind is LayerKind.MLA for l in model.layers)
    if is_mla and (kv_cache_dtype or "auto").startswith("fp8") and mla_fp8_block_size:
        return int(mla_fp8_block_size)
    return int(platform_block_size or DEFAULT_BLOCK_SIZE)


def round_up(x: int, multiple: int) -> int:
    return -(-x // multiple) * multiple


def packed_layout_in_effect(model: ModelDescription, kv_cache_dtype: str | None) -> bool:
    """Whether the model's packed fp8_ds_mla cache format is used.

    DeepSeek-V4 on the default CUDA backends (FlashMLA sparse; FlashInfer on SM12) and on the
    CPU build stores every attention cache as fp8_ds_mla: ``auto`` and any fp8 dtype resolve to
    it, a 16-bit dtype is refused (models/deepseek_v4/attention.py::_resolve_dsv4_kv_cache_dtype;
    only ``--attention-backend FLASHINFER_MLA_SPARSE_DSV4`` off SM12 keeps plain rows, which the
    plan does not model)."""
    if not any(l.packed_state_bytes for l in (*model.layers, *model.aux_caches)):
        return False
    name = (kv_cache_dtype or "auto").lower()
    if name == "auto" or name.startswith("fp8"):
        return True
    raise InputError(
        f"--kv-cache-dtype {kv_cache_dtype}: {model.model_type}'s fp8_ds_mla KV layout (vLLM's default "
        "backends for it) only supports fp8; vLLM refuses this at start-up. Use --kv-cache-dtype auto or fp8"
    )


def fixed_layout_page(layer: AttentionLayer, bs: int, s: int, packed: bool) -> tuple[int, int]:
    """(page bytes, unpadded bytes) of a cache whose layout the model file fixes (DeepSeek-V4).

    AttentionSpec.page_size_bytes (v1/kv_cache_interface.py): num_states = block_size //
    tokens_per_state, one single-vector state per token group (MLA-style: no separate V), the
    packed fp8_ds_mla state (584 B: 448 NoPE fp8 + 128 RoPE bf16 + 8 scale bytes) or
    head_size × element size, rounded up to the layout's alignment (_apply_alignment_padding:
    576 B packed, 512 B plain)."""
    states = bs // max(1, layer.tokens_per_state)
    if packed and layer.packed_state_bytes:
        per_state = layer.packed_state_bytes
    else:
        per_state = max(1, layer.num_kv_heads) * layer.head_size * (layer.fixed_dtype_bytes or s)
    real = states * per_state
    align = layer.page_alignment_packed if packed else layer.page_alignment_plain
    return (round_up(real, align) if align else real), real


def layer_kv_specs(
    model: ModelDescription,
    tp: int = 1,
    kv_cache_dtype: str | None = "auto",
    block_size: int | None = None,
    *,
    num_spec: int = 0,
    disable_hybrid: bool = False,
    mla_fp8_block_size: int | None = FLASHMLA_BLOCK_SIZE,
    platform_block_size: int | None = None,
    dtype_bytes: int | None = None,
    max_model_len: int | None = None,
) -> list[LayerKVSpec]:
    """Per-layer KV specs on one TP rank, with vLLM's block-size rules applied.

    ``dtype_bytes`` is the served element size (``--dtype``); the auto KV dtype and the Mamba
    states stored in the model dtype follow it."""
    s = kv_dtype_bytes(kv_cache_dtype, model, dtype_bytes)
    if dtype_bytes and dtype_bytes != model.dtype_bytes and model.is_hybrid:
        model = _mamba_in_served_dtype(model, dtype_bytes)
    bs = block_size or backend_block_size(model, kv_cache_dtype, mla_fp8_block_size, platform_block_size)
    if model.is_hybrid and is_attention_free(model):
        # A Mamba-only model keeps one state per request; its "block" spans the whole request
        # (MambaModelConfig: mamba_block_size = max_model_len; prefix caching is off).
        bs = block_size or max_model_len or model.derived_max_model_len
    elif model.is_hybrid:
        bs = max(bs, hybrid_block_size(model, tp, s, kv_cache_dtype, bs, num_spec))
    specs: list[LayerKVSpec] = []
    attn_index = 0
    # The attention layer the Mamba pages are padded to: looked up once (per Mamba layer it made a
    # pure-Mamba model of n layers cost n^2: 20,000 layers took 6 minutes).
    first_attn = next((l for l in model.layers if l.kind not in (LayerKind.MAMBA, LayerKind.NONE)), None)
    packed = packed_layout_in_effect(model, kv_cache_dtype)
    for i, layer in enumerate((*model.layers, *model.aux_caches)):
        idx = i if layer.name != "indexer" else i - model.num_layers
        if layer.index is not None:
            idx = layer.index
        if layer.kind is LayerKind.NONE or layer.kv_shared:
            continue
        if layer.block_size is not None:
            # The model file sets this cache's block size and layout (DeepSeek-V4): the
            # engine block size and the KV dtype's element size do not change it.
            page, real = fixed_layout_page(layer, layer.block_size, s, packed)
            specs.append(LayerKVSpec(
                idx, layer.kind.value, layer.block_size, 1, layer.head_size,
                layer.fixed_dtype_bytes or (1 if packed else s), page,
                sliding_window=layer.sliding_window if layer.kind is LayerKind.SLIDING_WINDOW else None,
                real_page_size_bytes=real, name=layer.name, packed=model.kv_block_outermost,
            ))
            continue
        if layer.kind is LayerKind.MAMBA:
            real = mamba_page_bytes(layer, tp, num_spec)
            page = real
            if first_attn is not None:
                a, _ = _attn_page_per_token(first_attn, tp, s, kv_cache_dtype)
                page = max(real, bs * a)  # padded to the attention page
            specs.append(LayerKVSpec(idx, LayerKind.MAMBA.value, bs, 0, 0, layer.mamba.ssm_dtype_bytes, page, real_page_size_bytes=real))
            continue
        per_token, heads = _attn_page_per_token(layer, tp, s, kv_cache_dtype)
        kind = layer.kind
        if disable_hybrid and kind in (LayerKind.SLIDING_WINDOW, LayerKind.CHUNKED_LOCAL):
            kind = LayerKind.FULL
        specs.append(
            LayerKVSpec(
                idx,
                kind.value,
                bs,
                heads,
                layer.head_size,
                layer.fixed_dtype_bytes or (1 if kv_cache_dtype == "fp8_ds_mla" else s),
                bs * per_token,
                sliding_window=layer.sliding_window if kind is LayerKind.SLIDING_WINDOW else None,
                chunk_size=layer.chunk_size if kind is LayerKind.CHUNKED_LOCAL else None,
                real_page_size_bytes=bs * per_token,
                name=layer.name,
            )
        )
        attn_index += 1
    return specs


def _mamba_in_served_dtype(model: ModelDescription, served: int) -> ModelDescription:
    """Conv/SSM states kept in the model dtype (mamba_cache_dtype auto) take the served size;
    a state the config pins (mamba_ssm_dtype float32) keeps its own."""

    ck = model.dtype_bytes

    def fix(layer: AttentionLayer) -> AttentionLayer:
        st = layer.mamba
        if st is None:
            return layer
        st = st._replace(conv_dtype_bytes=served if st.conv_dtype_bytes == ck else st.conv_dtype_bytes,
                     ssm_dtype_bytes=served if st.ssm_dtype_bytes == ck else st.ssm_dtype_bytes)
        return layer._replace(mamba=st)

    return model._replace(layers=tuple(fix(l) for l in model.layers))


class KVGroup(NamedTuple):
    """Layers that share one KV cache page layout (vLLM's KV cache groups)."""
    kind: str
    specs: tuple[LayerKVSpec, ...]
    group_size: int  # layers per group incl. padding layers
    page_size_bytes: int
    block_size: int
    sliding_window: int | None = None
    chunk_size: int | None = None
    total_page_bytes: int | None = None  # packed groups: the members' pages side by side

    @property
    def bytes_per_block(self) -> int:
        if self.total_page_bytes is not None:
            return self.total_page_bytes
        return self.group_size * self.page_size_bytes


class KVLayout(NamedTuple):
    """The KV cache layout of a model under one launch: its groups, the bytes of one block and the block size."""
    groups: tuple[KVGroup, ...]
    bytes_per_block: int
    block_size: int  # the engine's block size (min over groups)
    padding_layers: int = 0
    uniform: bool = True

    @property
    def num_groups(self) -> int:
        return len(self.groups)


def _spec_key(sp: LayerKVSpec) -> tuple:
    return (sp.kind, sp.page_size_bytes, sp.sliding_window, sp.chunk_size, sp.name)


def kv_layout(specs: list[LayerKVSpec]) -> KVLayout:
    """Group layers as vLLM's hybrid allocator does and size one block (v1/core/kv_cache_utils.py::get_kv_cache_groups, _get_kv_cache_bytes_per_block)."""
    if not specs:
        return KVLayout((), 0, DEFAULT_BLOCK_SIZE)
    if any(sp.packed for sp in specs) and len({sp.page_size_bytes for sp in specs}) > 1:
        return packed_kv_layout(specs)
    keys = {_spec_key(sp) for sp in specs}
    if len(keys) == 1 or len({sp.kind for sp in specs}) == 1 and len({sp.name for sp in specs}) == 1:
        # One spec for all layers, or one type with differing sizes (UniformTypeKVCacheSpecs).
        total = sum(sp.page_size_bytes for sp in specs)
        sp0 = specs[0]
        g = KVGroup(sp0.kind, tuple(specs), len(specs), total // len(specs), sp0.block_size, sp0.sliding_window, sp0.chunk_size)
        return KVLayout((g,), total, sp0.block_size, 0, True)
    # Unify page sizes: smaller pages that divide the largest get a bigger block (kv_cache_utils.py::unify_kv_cache_spec_page_size).
    largest = max(sp.page_size_bytes for sp in specs)
    unified: list[LayerKVSpec] = []
    for sp in specs:
        if sp.page_size_bytes != largest and sp.kind != LayerKind.MAMBA.value and largest % sp.page_size_bytes == 0:
            ratio = largest // sp.page_size_bytes
            sp = LayerKVSpec(sp.layer_index, sp.kind, sp.block_size * ratio, sp.num_kv_heads, sp.head_size, sp.dtype_bytes, largest, sp.sliding_window, sp.chunk_size, sp.real_page_size_bytes, sp.name)
        elif sp.page_size_bytes != largest:
            sp = LayerKVSpec(sp.layer_index, sp.kind, sp.block_size, sp.num_kv_heads, sp.head_size, sp.dtype_bytes, largest, sp.sliding_window, sp.chunk_size, sp.real_page_size_bytes, sp.name)
        unified.append(sp)
    buckets: dict[tuple, list[LayerKVSpec]] = {}
    for sp in unified:
        buckets.setdefault((sp.kind, sp.sliding_window, sp.chunk_size, sp.block_size, sp.name), []).append(sp)
    sizes = [len(v) for v in buckets.values()]
    group_size = min(sizes)
    if max(sizes) < 1.5 * min(sizes):
        group_size = max(sizes)
    groups: list[KVGroup] = []
    padding = 0
    for (kind, sw, chunk, bsz, _name), layers in buckets.items():
        n_groups = cdiv(len(layers), group_size)
        padding += n_groups * group_size - len(layers)
        for gi in range(n_groups):
            members = tuple(layers[gi::n_groups])
            groups.append(KVGroup(kind, members, group_size, largest, bsz, sw, chunk))
    bytes_per_block = group_size * largest
    attn_blocks = [g.block_size for g in groups if g.kind != LayerKind.MAMBA.value] or [groups[0].block_size]
    return KVLayout(tuple(groups), bytes_per_block, min(attn_blocks), padding, False)


def _uniform_type_key(sp: LayerKVSpec) -> tuple:
    """Layers that may share one UniformTypeKVCacheSpecs (is_uniform_type): the same block
    size and the same spec family: full attention (MLA included) together, sliding window
    per window size, Mamba, chunked local per chunk size."""
    family = {LayerKind.MLA.value: LayerKind.FULL.value}.get(sp.kind, sp.kind)
    return (sp.block_size, family, sp.sliding_window if sp.kind == LayerKind.SLIDING_WINDOW.value else None,
            sp.chunk_size if sp.kind == LayerKind.CHUNKED_LOCAL.value else None)


def approximate_gcd(values: list[int], lower_bound: int) -> int:
    """kv_cache_utils.py::_approximate_gcd: the chunk size in [lower_bound, max(values)] that
    minimises Σ upward padding of each value to a multiple of it; ties go to the larger."""
    lo, hi = max(1, lower_bound), max(values)
    if lo > hi:
        return lo
    best_d, best_pad = lo, None
    for d in range(lo, hi + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad is None or pad <= best_pad:
            best_d, best_pad = d, pad
    return best_d


def packed_kv_layout(specs: list[LayerKVSpec]) -> KVLayout:
    """vLLM's packed groups for a block-outermost KV layout with mixed page sizes
    (kv_cache_utils.py::_get_packed_kv_cache_groups, 0.32): layers are bucketed greedily by
    uniform type in registration order; a bucket with as many layers of each page size is a
    repeating pattern and is split into groups of ``repeats`` pattern repeats (the
    approximate gcd of the balanced buckets' counts, at least the largest mixed balanced
    bucket's); state buckets (Mamba, or sliding window when nothing repeats) are split to
    fit the widest group. One block holds every group's pages side by side: bytes per block
    = the largest group's page sum (_get_kv_cache_bytes_per_block; the kernel-block stride
    alignments of DeepSeek-V4's backends are all 1 at its block sizes)."""
    buckets: dict[tuple, list[LayerKVSpec]] = {}
    for sp in specs:
        buckets.setdefault(_uniform_type_key(sp), []).append(sp)
    info = []
    for members in buckets.values():
        by_page: dict[int, list[LayerKVSpec]] = {}
        for sp in members:
            by_page.setdefault(sp.page_size_bytes, []).append(sp)
        balanced = len({len(v) for v in by_page.values()}) == 1
        most = max(len(v) for v in by_page.values())
        info.append((members, by_page, balanced, most))
    min_repeats = max((most for _, by_page, balanced, most in info if balanced and len(by_page) > 1), default=0)
    repeats = approximate_gcd([most for _, _, balanced, most in info if balanced], min_repeats) if min_repeats else None

    def n_groups(balanced: bool, most: int) -> int:
        return cdiv(most, repeats) if (balanced and repeats is not None) else 1

    def is_state(members: list[LayerKVSpec]) -> bool:
        k = members[0].kind
        return k == LayerKind.MAMBA.value or (repeats is None and k == LayerKind.SLIDING_WINDOW.value)

    def widest(by_page: dict[int, list[LayerKVSpec]], n: int) -> int:
        return sum(cdiv(len(v), n) * page for page, v in by_page.items())

    anchor = max((widest(by_page, len(members) if is_state(members) else n_groups(balanced, most))
                  for members, by_page, balanced, most in info), default=0)
    groups: list[KVGroup] = []
    for members, by_page, balanced, most in info:
        n = n_groups(balanced, most)
        if anchor and is_state(members):
            n = max(n, cdiv(len(members), max(anchor // members[0].page_size_bytes, 1)))
        if n == 1:
            parts = [members]
        else:
            pattern = list(zip(*by_page.values()))
            parts = [[sp for rep in pattern[i::n] for sp in rep] for i in range(n)]
        for part in parts:
            total = sum(sp.page_size_bytes for sp in part)
            sp0 = part[0]
            groups.append(KVGroup(sp0.kind, tuple(part), len(part), total // len(part), sp0.block_size,
                                  sp0.sliding_window, sp0.chunk_size, total_page_bytes=total))
    bytes_per_block = max(g.bytes_per_block for g in groups)
    attn_blocks = [g.block_size for g in groups if g.kind != LayerKind.MAMBA.value] or [groups[0].block_size]
    return KVLayout(tuple(groups), bytes_per_block, min(attn_blocks), 0, False)


def project_layout(layout: KVLayout, layer_indices: set[int]) -> KVLayout:
    """The whole-model groups seen by one pipeline stage (``_project_kv_cache_groups_to_worker``).

    Groups keep their kind and block size (so blocks per request do not change); a block
    on this stage holds only the stage's layers of each group.
    """
    groups = []
    for g in layout.groups:
        members = tuple(sp for sp in g.specs if sp.layer_index in layer_indices)
        total = sum(sp.page_size_bytes for sp in members) if g.total_page_bytes is not None else None
        groups.append(KVGroup(g.kind, members, len(members), g.page_size_bytes, g.block_size, g.sliding_window, g.chunk_size, total))
    bpb = max((g.bytes_per_block for g in groups), default=0)
    return KVLayout(tuple(groups), bpb, layout.block_size, layout.padding_layers, layout.uniform)


def group_blocks_per_request(
    group: KVGroup,
    max_model_len: int,
    *,
    max_num_batched_tokens: int,
    max_concurrent_batches: int = 1,
    mamba_blocks: int = 1,
) -> int:
    """cdiv(max_memory_usage_bytes(spec, L), page) for one group (KVCacheSpec.max_memory_usage_bytes; docs/memory-model.md#kv-cache)."""
    L, bs = max_model_len, group.block_size
    if group.kind == LayerKind.SLIDING_WINDOW.value and group.sliding_window:
        in_flight = max_concurrent_batches * max_num_batched_tokens
        return cdiv(min(group.sliding_window - 1 + in_flight, L), bs) + 1
    if group.kind == LayerKind.CHUNKED_LOCAL.value and group.chunk_size:
        in_flight = max_concurrent_batches * max_num_batched_tokens
        return cdiv(min(group.chunk_size + in_flight, L), bs)
    if group.kind == LayerKind.MAMBA.value:
        return mamba_blocks
    if group.kind == LayerKind.CROSS.value:
        # the encoder's states, sized by the encoder budget (CrossAttentionSpec.max_memory_usage_bytes:
        # scheduler_config.max_num_encoder_input_tokens, which SchedulerConfig sets to max_num_batched_tokens)
        return cdiv(max_num_batched_tokens, bs)
    return cdiv(L, bs)


def blocks_per_request(layout: KVLayout, max_model_len: int, **kw) -> int:
    return sum(group_blocks_per_request(g, max_model_len, **kw) for g in layout.groups)


def per_token_bytes(specs: list[LayerKVSpec]) -> float:
    """KV bytes per token summed over attention layers on one rank (for printing)."""
    return sum(sp.page_size_bytes / sp.block_size for sp in specs if sp.kind != LayerKind.MAMBA.value)
