"""Encoder-only pooling models (BERT, RoBERTa / XLM-RoBERTa: bge, e5, gte-style embedders and
rerankers).

From vLLM 0.32's model_executor/models/bert.py and roberta.py, checked against vLLM on the CPU
build (scripts/vllm_kv_oracle.py: no layer registers a KV cache spec, get_kv_cache_groups finds
none): bidirectional attention runs over each request alone, so the engine keeps no KV pool; the
runner is "pooling", so the profile run ends with the pooler, not the sampler
(gpu_model_runner.py::_dummy_pooler_run), and no CUDA graphs beyond the encoder's.

Weights: word, position (``max_position_embeddings``) and token-type embeddings with their
LayerNorm; per layer q/k/v and output projections with biases, two LayerNorms and an ungated
GELU MLP with biases; the pooler dense layer where the architecture has one.
"""

from __future__ import annotations

from oomguard.model.architectures import register
from oomguard.model.architectures.builder import build_description
from oomguard.model.architectures.common import first_architecture, need
from oomguard.model.description import AttentionLayer, LayerKind, ModelDescription


@register("bert", "roberta", "xlm-roberta")
def describe_encoder(config: dict, cfg: dict, *, source: str, name: str, hf_quant: dict | None) -> ModelDescription:
    mt = str(cfg.get("model_type") or config.get("model_type"))
    H = int(need(cfg, "hidden_size", what="hidden size", model_type=mt))
    n = int(need(cfg, "num_hidden_layers", what="layer count", model_type=mt))
    heads = int(need(cfg, "num_attention_heads", what="attention heads", model_type=mt))
    vocab = int(need(cfg, "vocab_size", what="vocabulary size", model_type=mt))
    inter = int(cfg.get("intermediate_size") or 4 * H)
    max_pos = int(cfg.get("max_position_embeddings") or 512)
    types = int(cfg.get("type_vocab_size") or 0)
    # No decoder KV: every layer is attention over the request alone (kind NONE for the KV cache;
    # its projections are counted as an attention layer's).
    layers = tuple(AttentionLayer(LayerKind.NONE, heads, H // heads, H // heads, kv_shared=True) for _ in range(n))
    arch = first_architecture(config)
    # position and token-type embeddings, the embedding LayerNorm, the o_proj bias and the MLP
    # biases the generic layer formula leaves out; the pooler / classifier dense (H×H + H) only
    # for the classification heads (vLLM's embedding BertModel has none: the oracle's numel)
    extra = (max_pos + types) * H + 2 * H + n * (H + inter + H + 2 * H)
    fp32 = 0
    if arch.endswith("ForSequenceClassification"):
        # created in head_dtype (float32 by default: the sweep's by-dtype bytes), PretrainedConfig's 2 labels
        labels = int(cfg.get("num_labels") or len(cfg.get("id2label") or {}) or 2)
        fp32 = H * H + H + H * labels + labels
    # BertForMaskedLM (models/bert.py BertMLMHead): dense H×H, LayerNorm and a decoder nn.Linear of
    # its own (load_weights copies the embedding into it: two tensors in memory, never tied)
    mlm = mt == "bert" and arch == "BertForMaskedLM"
    if mlm:
        extra += H * H + 3 * H + vocab
    return build_description(
        config, cfg, name=name, source=source, model_type=mt, hf_quant=hf_quant, max_len=max_pos, rope=None,
        family="encoder",
        hidden_size=H,
        num_layers=n,
        num_attention_heads=heads,
        num_kv_heads=heads,
        head_size=H // heads,
        intermediate_size=inter,
        vocab_size=vocab,
        tie_word_embeddings=not mlm,
        layers=layers,
        derived_max_model_len=max_pos - (2 if mt in ("roberta", "xlm-roberta") else 0),
        qkv_bias=True,
        gated_mlp=False,
        pooling=True,
        extra_params={"unquantized": [extra, False], **({"fp32": [fp32, False]} if fp32 else {})},
    )


@register("modernbert")
def describe_modernbert(config: dict, cfg: dict, *, source: str, name: str, hf_quant: dict | None) -> ModelDescription:
    """ModernBERT (vLLM 0.32 models/modernbert.py): a pooling encoder with no KV cache.

    Per layer a fused Wqkv (3·H × H) and Wo (H × H), a gated GeGLU MLP (Wi: H → 2·I, Wo: I → H),
    LayerNorms without the first layer's attention norm (the embedding norm stands in for it);
    biases only where ``attention_bias`` / ``mlp_bias`` / ``norm_bias`` say. Rotary positions, so no
    position table. The heads vLLM adds per architecture: the sequence classifier's pooler dense +
    norm and classifier, and the token classifier's classifier, in ``head_dtype`` (float32); the
    token classifier's prediction head (dense + norm) in the model dtype."""
    mt = "modernbert"
    H = int(need(cfg, "hidden_size", what="hidden size", model_type=mt))
    n = int(need(cfg, "num_hidden_layers", what="layer count", model_type=mt))
    heads = int(need(cfg, "num_attention_heads", what="attention heads", model_type=mt))
    vocab = int(need(cfg, "vocab_size", what="vocabulary size", model_type=mt))
    inter = int(need(cfg, "intermediate_size", what="MLP width", model_type=mt))
    max_pos = int(cfg.get("max_position_embeddings") or 8192)
    norm_bias, attn_bias, mlp_bias = (bool(cfg.get(k, d)) for k, d in
                                      (("norm_bias", False), ("attention_bias", False), ("mlp_bias", False)))
    cls_bias = bool(cfg.get("classifier_bias", False))
    labels = int(cfg.get("num_labels") or len(cfg.get("id2label") or {}) or 2)  # PretrainedConfig: 2 labels
    layers = tuple(AttentionLayer(LayerKind.NONE, heads, H // heads, H // heads, kv_shared=True) for _ in range(n))
    # the layer formula counts 2 norms per layer and the final norm: (2n − 1) layer norms plus the
    # embedding and final norms are as many; what it leaves out are the biases
    extra = (2 * n + 1) * H * norm_bias + n * H * attn_bias + n * (2 * inter + H) * mlp_bias
    fp32 = 0
    arch = first_architecture(config)
    if arch.endswith("ForSequenceClassification"):
        fp32 = H * H + H * cls_bias + H * (1 + norm_bias) + H * labels + labels
    elif arch.endswith("ForTokenClassification"):
        extra += H * H + H * cls_bias + H * (1 + norm_bias)
        fp32 = H * labels + labels
    params = {"unquantized": [extra, False]}
    if fp32:
        params["fp32"] = [fp32, False]
    return build_description(
        config, cfg, name=name, source=source, model_type=mt, hf_quant=hf_quant, max_len=max_pos, rope=None,
        family="encoder",
        hidden_size=H,
        num_layers=n,
        num_attention_heads=heads,
        num_kv_heads=heads,
        head_size=H // heads,
        intermediate_size=inter,
        vocab_size=vocab,
        tie_word_embeddings=True,
        layers=layers,
        derived_max_model_len=max_pos,
        qkv_bias=attn_bias,
        gated_mlp=True,
        pooling=True,
        extra_params=params,
    )


@register("whisper")
def describe_whisper(config: dict, cfg: dict, *, source: str, name: str, hf_quant: dict | None) -> ModelDescription:
    """Whisper (vLLM 0.32 models/whisper.py): an audio encoder and a text decoder with cross-attention.

    KV cache (checked against vLLM on the CPU build, tests/data/oracle/sweep_vllm-0.32.0.json): every
    decoder layer registers a FullAttentionSpec for its self-attention and a CrossAttentionSpec for
    its encoder attention, same heads and page; a request holds ``cdiv(max_model_len, block)``
    self-attention blocks and ``cdiv(max_num_encoder_input_tokens, block)`` cross-attention blocks
    (CrossAttentionSpec.max_memory_usage_bytes; SchedulerConfig sets that budget to
    max_num_batched_tokens). max_model_len is ``max_target_positions``.

    Weights: QKV / MergedColumn linears with biases on every projection (the k bias is allocated,
    zero in the checkpoint), LayerNorms with bias, ungated GELU fc1/fc2; the decoder's token
    embedding is an ``nn.Embedding`` (no vocabulary padding) tied to ``proj_out``, positions a
    learned table of ``max_target_positions``; the encoder (two Conv1d, learned
    ``max_source_positions`` positions, its layers and final norm) is the "vision" part. The token
    embedding is replicated, not split, at TP > 1 (the plan's embed part assumes vLLM's usual split)."""
    mt = "whisper"
    d = int(need(cfg, "d_model", "hidden_size", what="hidden size", model_type=mt))
    n_dec = int(need(cfg, "decoder_layers", what="decoder layers", model_type=mt))
    n_enc = int(need(cfg, "encoder_layers", what="encoder layers", model_type=mt))
    heads = int(need(cfg, "decoder_attention_heads", what="decoder attention heads", model_type=mt))
    vocab = int(need(cfg, "vocab_size", what="vocabulary size", model_type=mt))
    f_dec = int(cfg.get("decoder_ffn_dim") or 4 * d)
    f_enc = int(cfg.get("encoder_ffn_dim") or 4 * d)
    mels = int(cfg.get("num_mel_bins") or 80)
    src_pos = int(cfg.get("max_source_positions") or 1500)
    tgt_pos = int(cfg.get("max_target_positions") or 448)
    hd = d // heads
    attn = 4 * d * d + 4 * d  # q, k, v, o with biases
    mlp = 2 * d * f_dec + f_dec + d
    one = {"attn": [2 * attn, True], "mlp": [mlp, True], "unquantized": [3 * 2 * d, False]}  # self + cross, 3 LayerNorms
    none = {"attn": [0, True]}
    layers = (tuple(AttentionLayer(LayerKind.FULL, heads, hd, hd, index=i) for i in range(n_dec))
              + tuple(AttentionLayer(LayerKind.CROSS, heads, hd, hd, index=i) for i in range(n_dec)))
    encoder = (mels * d * 3 + d) + (d * d * 3 + d) + src_pos * d + n_enc * (attn + 2 * d * f_enc + f_enc + d + 2 * 2 * d) + 2 * d
    # the layer formula's final norm is d; the decoder's final LayerNorm has a bias too, and its
    # learned positions sit outside the layers
    extra = {"unquantized": [tgt_pos * d + d, False]}
    return build_description(
        config, cfg, name=name, source=source, model_type=mt, hf_quant=hf_quant, max_len=tgt_pos, rope=None, multimodal=True,
        family="encoder-decoder",
        hidden_size=d,
        num_layers=n_dec,
        num_attention_heads=heads,
        num_kv_heads=heads,
        head_size=hd,
        intermediate_size=f_dec,
        vocab_size=vocab,
        tie_word_embeddings=True,
        layers=layers,
        layer_params=tuple(one if i < n_dec else none for i in range(2 * n_dec)),
        derived_max_model_len=tgt_pos,
        qkv_bias=True,
        gated_mlp=False,
        vision_params=encoder,
        extra_params=extra,
    )


def _pad64(rows: int) -> int:
    return -(-rows // 64) * 64


def _tower_layer(h: int, i: int) -> int:
    """One CLIP/SigLIP transformer layer: q, k, v, o with biases, fc1/fc2 with biases, two LayerNorms."""
    return 4 * h * h + 4 * h + 2 * h * i + i + h + 4 * h


@register("clip", "siglip")
def describe_clip(config: dict, cfg: dict, *, source: str, name: str, hf_quant: dict | None) -> ModelDescription:
    """CLIPModel / SiglipModel as vLLM 0.32 serves them (models/clip.py CLIPEmbeddingModel,
    siglip.py SiglipEmbeddingModel): a pooling model holding the text and the vision tower.

    KV: CLIP's text tower is causal, so each of its layers registers a full-attention cache
    (max_model_len = the text ``max_position_embeddings``, 77); SigLIP's is bidirectional and keeps
    none. Weights: token and position tables are VocabParallelEmbeddings (rows padded to 64, the
    embed part); text layers as ``_tower_layer``, the final LayerNorm, SigLIP's text ``head``
    (H → projection_size, with bias). Vision: patch Conv2d (SigLIP with bias; CLIP without, plus a
    class embedding and a pre-LayerNorm), learned positions (patches, + 1 for CLIP's class token),
    the layers, the post-LayerNorm, SigLIP's attention-pooling head where ``vision_use_head`` is
    not false, and CLIP's text / visual projections (bias-free, projection_dim)."""
    mt = str(config.get("model_type") or cfg.get("model_type"))
    top = config
    text = top.get("text_config") or {}
    vis = top.get("vision_config") or {}
    clip = mt.startswith("clip")
    H = int(need(text, "hidden_size", what="text hidden size", model_type=mt))
    n = int(need(text, "num_hidden_layers", what="text layer count", model_type=mt))
    heads = int(need(text, "num_attention_heads", what="text attention heads", model_type=mt))
    vocab = int(need(text, "vocab_size", what="vocabulary size", model_type=mt))
    I = int(text.get("intermediate_size") or 4 * H)
    pos = int(text.get("max_position_embeddings") or (77 if clip else 64))
    h = int(need(vis, "hidden_size", what="vision hidden size", model_type=mt))
    nv = int(need(vis, "num_hidden_layers", what="vision layer count", model_type=mt))
    iv = int(vis.get("intermediate_size") or 4 * h)
    patch, image, ch = int(vis.get("patch_size") or 16), int(vis.get("image_size") or 224), int(vis.get("num_channels") or 3)
    patches = (image // patch) ** 2
    vision = ch * patch * patch * h + nv * _tower_layer(h, iv) + 2 * h
    if clip:
        proj = int(top.get("projection_dim") or text.get("projection_dim") or 512)
        vision += h + (patches + 1) * h + 2 * h + h * proj + H * proj  # class token, positions, pre-LN, projections
        head = 0
    else:
        vision += h + patches * h
        if vis.get("vision_use_head", True) is not False:
            vision += h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h + (2 * h * iv + iv + h)
        head = H * int(text.get("projection_size") or H) + int(text.get("projection_size") or H)
    kind = LayerKind.FULL if clip else LayerKind.NONE
    layers = tuple(AttentionLayer(kind, heads, H // heads, H // heads, kv_shared=not clip) for _ in range(n))
    one = {"attn": [4 * H * H + 4 * H, True], "mlp": [2 * H * I + I + H, True], "unquantized": [4 * H, False]}
    return build_description(
        config, text, name=name, source=source, model_type=mt, hf_quant=hf_quant, max_len=pos, rope=None, multimodal=True,
        family="encoder",
        hidden_size=H,
        num_layers=n,
        num_attention_heads=heads,
        num_kv_heads=heads,
        head_size=H // heads,
        intermediate_size=I,
        vocab_size=vocab,
        tie_word_embeddings=True,
        layers=layers,
        layer_params=(one,) * n,
        derived_max_model_len=pos,
        qkv_bias=True,
        gated_mlp=False,
        pooling=True,
        vision_params=vision,
        per_layer_embed_params=_pad64(pos) * H,  # the position table, in vLLM's embed part
        extra_params={"unquantized": [H + head, False]},  # the final LayerNorm's bias; SigLIP's text head
    )
