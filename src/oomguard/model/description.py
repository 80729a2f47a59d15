"""The normalised model description every memory computation reads.

A ``ModelDescription`` is built once from a Hugging Face config (see
``oomguard.model.architectures``) and is frozen: the memory model never looks at
raw config dictionaries. Field names follow vLLM's vocabulary.
"""

from __future__ import annotations

import enum

from oomguard.records import NamedTuple

# Bytes per element of the dtypes vLLM runs a model in (torch's element sizes); the one table
# the adapters (conv/SSM state), the dtype resolution (engine.py) and the weights read.
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


class LayerKind(str, enum.Enum):
    """How one decoder layer stores per-request state (vLLM's KV cache spec types)."""

    FULL = "full"  # FullAttentionSpec
    SLIDING_WINDOW = "sliding_window"  # SlidingWindowSpec
    CHUNKED_LOCAL = "chunked_local"  # ChunkedLocalAttentionSpec (Llama-4)
    MLA = "mla"  # MLAAttentionSpec (DeepSeek V2/V3)
    MAMBA = "mamba"  # MambaSpec: Mamba1/2, Gated DeltaNet, linear attention
    CROSS = "cross"  # CrossAttentionSpec (encoder-decoder / mllama)
    NONE = "none"  # no KV cache (encoder-only, KV-shared layers)


class AttentionLayer(NamedTuple):
    """How one decoder layer stores per-request state (before the TP split)."""
    kind: LayerKind
    num_kv_heads: int = 0  # total, before TP split
    head_size: int = 0
    head_size_v: int = 0  # == head_size unless the model says otherwise
    sliding_window: int | None = None
    chunk_size: int | None = None  # chunked local attention
    # Mamba-family state (per layer, before TP split): tensors as (shape, dtype_bytes)
    # functions are evaluated in kv_spec with the TP size, so we keep raw numbers.
    mamba: "MambaState | None" = None
    moe: bool = False  # this layer's MLP is a mixture of experts
    kv_shared: bool = False  # reuses another layer's cache (Gemma-3n/4 YOCO)
    fixed_dtype_bytes: int | None = None  # cache stored in a fixed dtype (e.g. the fp8 V3.2 indexer)
    name: str = ""  # e.g. "indexer" for auxiliary caches
    mlp_multiplier: int = 1  # Gemma-4 KV-shared layers use a double-wide MLP
    k_eq_v: bool = False  # keys double as values (Gemma-4 global layers): no v_proj
    # Caches whose layout the model file fixes (DeepSeek-V4, kv_spec.py): a block size the
    # layer always uses, tokens folded into one stored state (compressed caches), the bytes
    # of one state in the packed fp8_ds_mla layout, and the page alignment per layout.
    block_size: int | None = None
    tokens_per_state: int = 1
    packed_state_bytes: int | None = None
    page_alignment_packed: int | None = None
    page_alignment_plain: int | None = None
    index: int | None = None  # the decoder layer an auxiliary cache belongs to


class MambaState(NamedTuple):
    """Recurrent state of a Gated DeltaNet / Mamba2 layer (vLLM MambaStateShapeCalculator)."""

    variant: str  # "gdn" | "mamba2" | "mamba1" | "short_conv"
    conv_dim: int  # channels of the causal conv (split by TP)
    conv_kernel: int
    num_heads: int  # value heads (GDN) / heads (mamba2), split by TP
    head_k_dim: int
    head_v_dim: int
    n_groups: int = 0  # mamba2
    state_size: int = 0  # mamba2 d_state
    conv_dtype_bytes: int = 2
    ssm_dtype_bytes: int = 2


class MoE(NamedTuple):
    """The mixture-of-experts shape of a model: experts, experts per token, expert widths."""
    num_experts: int
    top_k: int
    expert_intermediate_size: int
    shared_intermediate_size: int = 0
    num_moe_layers: int = 0
    num_dense_layers: int = 0  # layers with a dense MLP instead of experts
    dense_intermediate_size: int = 0
    dense_alongside: bool = False  # a dense MLP runs in parallel with the experts (Gemma-4)


class MLA(NamedTuple):
    """Multi-head latent attention dimensions (DeepSeek V2/V3): the latent and rotary widths vLLM caches."""
    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None


class Quantization(NamedTuple):
    """How the checkpoint's weights are stored: method, bits, group or block size, and which parts stay unquantized."""
    method: str  # "none", "fp8", "awq", "gptq", "nvfp4", "mxfp4", "compressed-tensors", "bitsandbytes", "gguf"
    bits: int = 16
    group_size: int | None = None
    block_size: tuple[int, int] | None = None  # fp8 block-wise scales
    dynamic: bool = False
    exclude_attention: bool = False  # e.g. gpt-oss keeps attention in bf16
    experts_only: bool = False
    source: str = ""  # which file/field told us

    @property
    def is_quantized(self) -> bool:
        return self.method != "none"


class ModelDescription(NamedTuple):
    """The normalised model every memory computation reads, built once from a Hugging Face config."""
    name: str
    source: str  # where the config came from (path or catalog id)
    model_type: str
    architecture: str
    family: str  # adapter that built it
    hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_size: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool
    dtype: str  # "bfloat16", "float16", "float32"
    layers: tuple[AttentionLayer, ...]
    max_position_embeddings: int | None
    derived_max_model_len: int  # vLLM's _get_and_verify_max_len without user value
    rope_scaling: dict | None = None
    # LongRoPE's unscaled length (the text config's field): vLLM's default max_model_len for it
    original_max_position_embeddings: int | None = None
    moe: MoE | None = None
    mla: MLA | None = None
    quantization: Quantization = Quantization("none")
    attn_output_gate: bool = False
    qkv_bias: bool = False
    is_multimodal: bool = False
    vision_params: int = 0  # estimated parameter count of the vision/audio towers
    audio_params: int = 0  # the audio towers' share of vision_params
    num_mtp_layers: int = 0
    # Exact bytes from safetensors headers (whole checkpoint), when read.
    checkpoint_bytes: int | None = None
    checkpoint_dtype_bytes: dict | None = None
    mrope: bool = False
    # bytes per parameter by module category under the checkpoint's quantization
    category_bytes: dict | None = None
    per_layer_embed_params: int = 0
    config_path: str | None = None
    vision: dict | None = None  # profile-run item of the vision tower (architectures/vision.py)  # the config.json read (for --engine-python)  # Gemma-3n/4 per-layer input embeddings
    notes: tuple[str, ...] = ()
    # How far this description is checked against vLLM's own code (model/coverage.py): "native"
    # (an adapter checked on this model_type; the sweep data says whether exact), or "generic"
    # (standard fields only: architectures/generic.py), with what it assumed.
    coverage: str = "native"
    assumptions: tuple[str, ...] = ()
    # What the registry sweep says about this architecture (inputs/coverage_data.py): level
    # ("native-exact" / "native" / "generic"), what was checked, and for generic the ranges.
    coverage_detail: dict | None = None
    # Fields the config left out, filled from its config class's defaults (inputs/config_defaults.py).
    defaults_applied: tuple[str, ...] = ()
    # Caches beside the decoder layers' own (DeepSeek-V4 sliding-window, compressor-state and
    # indexer caches), each with its decoder layer in ``index``.
    aux_caches: tuple[AttentionLayer, ...] = ()
    # vLLM packs pages of different sizes side by side in one block (block-outermost KV
    # layout, kv_cache_utils.py::_get_packed_kv_cache_groups): DeepSeek-V4's backends.
    kv_block_outermost: bool = False
    # Parameters per decoder layer computed by the adapter from the model file
    # (category -> count at TP 1, and whether vLLM splits it across TP ranks), for
    # architectures the generic formulas do not describe (architectures/deepseek_v4.py).
    gated_mlp: bool = True  # SwiGLU-style gate_up (3 matrices); False: up/down only (relu2, gelu)
    pooling: bool = False  # vLLM runs it with the pooling runner (embedders, rerankers): no sampler
    attention_free: bool = False  # the architecture is attention-free for vLLM (IsAttentionFree: Mamba, Mamba2)
    layer_params: tuple[dict, ...] | None = None
    extra_params: dict | None = None  # category -> (count, split_by_tp) outside the layers
    # The releases vLLM serves this architecture in, where not all (Llama-3.2-Vision: up to
    # 0.10.2, on the V0 engine only): (last release, vLLM's reason after it), and whether only V0 runs it.
    served_until: tuple[tuple[int, int, int], str] | None = None
    v0_only: bool = False

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES.get(self.dtype, 2)

    @property
    def num_kv_layers(self) -> int:
        return sum(1 for layer in self.layers if layer.kind is not LayerKind.NONE)

    @property
    def is_hybrid(self) -> bool:
        return any(layer.kind is LayerKind.MAMBA for layer in self.layers)
