"""KV cache specs per layer, grouping, block size, blocks per request.

Mirrors vLLM's ``v1/kv_cache_interface.py`` and ``v1/core/kv_cache_utils.py``
(``kv_cache_planning.py`` in 0.33): per-layer page sizes, the hybrid
block-size alignment for Mamba/GDN models, the layer grouping of the hybrid
allocator, ``bytes_per_block``, and ``max_memory_usage_bytes`` per request.
See docs/memory-model.md#kv-cache.
"""

from __future__ import annotations

from dataclasses import dataclass

from oomguard.errors import InputError
from oomguard.model.description import AttentionLayer, LayerKind, ModelDescription
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


@dataclass(frozen=True)
class LayerKVSpec:
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
) -> list[LayerKVSpec]:
    """Per-layer KV specs on one TP rank, with vLLM's block-size rules applied.

    ``dtype_bytes`` is the served element size (``--dtype``); the auto KV dtype and the Mamba
    states stored in the model dtype follow it."""
    s = kv_dtype_bytes(kv_cache_dtype, model, dtype_bytes)
    if dtype_bytes and dtype_bytes != model.dtype_bytes and model.is_hybrid:
        model = _mamba_in_served_dtype(model, dtype_bytes)
    bs = block_size or backend_block_size(model, kv_cache_dtype, mla_fp8_block_size, platform_block_size)
    if model.is_hybrid:
        bs = max(bs, hybrid_block_size(model, tp, s, kv_cache_dtype, bs, num_spec))
    specs: list[LayerKVSpec] = []
    attn_index = 0
    for i, layer in enumerate(model.layers):
        idx = i if layer.name != "indexer" else i - model.num_layers
        if layer.kind is LayerKind.NONE or layer.kv_shared:
            continue
        if layer.kind is LayerKind.MAMBA:
            real = mamba_page_bytes(layer, tp, num_spec)
            attn = next((l for l in model.layers if l.kind not in (LayerKind.MAMBA, LayerKind.NONE)), None)
            page = real
            if attn is not None:
                a, _ = _attn_page_per_token(attn, tp, s, kv_cache_dtype)
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
    from dataclasses import replace

    ck = model.dtype_bytes

    def fix(layer: AttentionLayer) -> AttentionLayer:
        st = layer.mamba
        if st is None:
            return layer
        st = replace(st, conv_dtype_bytes=served if st.conv_dtype_bytes == ck else st.conv_dtype_bytes,
                     ssm_dtype_bytes=served if st.ssm_dtype_bytes == ck else st.ssm_dtype_bytes)
        return replace(layer, mamba=st)

    return replace(model, layers=tuple(fix(l) for l in model.layers))


@dataclass(frozen=True)
class KVGroup:
    kind: str
    specs: tuple[LayerKVSpec, ...]
    group_size: int  # layers per group incl. padding layers
    page_size_bytes: int
    block_size: int
    sliding_window: int | None = None
    chunk_size: int | None = None

    @property
    def bytes_per_block(self) -> int:
        return self.group_size * self.page_size_bytes


@dataclass(frozen=True)
class KVLayout:
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


def project_layout(layout: KVLayout, layer_indices: set[int]) -> KVLayout:
    """The whole-model groups seen by one pipeline stage (``_project_kv_cache_groups_to_worker``).

    Groups keep their kind and block size (so blocks per request do not change); a block
    on this stage holds only the stage's layers of each group.
    """
    groups = []
    for g in layout.groups:
        members = tuple(sp for sp in g.specs if sp.layer_index in layer_indices)
        groups.append(KVGroup(g.kind, members, len(members), g.page_size_bytes, g.block_size, g.sliding_window, g.chunk_size))
    bpb = max((g.group_size * g.page_size_bytes for g in groups), default=0)
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
    return cdiv(L, bs)


def blocks_per_request(layout: KVLayout, max_model_len: int, **kw) -> int:
    return sum(group_blocks_per_request(g, max_model_len, **kw) for g in layout.groups)


def per_token_bytes(specs: list[LayerKVSpec]) -> float:
    """KV bytes per token summed over attention layers on one rank (for printing)."""
    return sum(sp.page_size_bytes / sp.block_size for sp in specs if sp.kind != LayerKind.MAMBA.value)
