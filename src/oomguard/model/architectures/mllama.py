"""Llama-3.2-Vision (``mllama``, MllamaForConditionalGeneration) on the releases that serve it.

vLLM served it up to 0.10.2, always on the V0 encoder-decoder runner (V1 never took
encoder-decoder models in those releases; 0.11 removed V0 and lists the architecture among the
previously supported ones, model_executor/models/registry.py). The description carries that gate
(``served_until``, ``v0_only``); model/engine.py applies it once the release is known.

Read from vLLM's V0 model file (model_executor/models/mllama.py, 0.6-0.10) and checked against
record S005 (vllm PR #12126, H100, weights 19.86 GiB, 6001 blocks of a 14.65 GiB pool):

- text: ``num_hidden_layers`` decoder layers; the ``cross_attention_layers`` among them have the
  self-attention layers' projections (one QKVParallelLinear, q/k RMSNorms over the head size,
  two scalar gates), so every layer weighs the same; the token embedding has 8 rows more than
  the vocabulary (``vocab_size + 8``), the LM head ``vocab_size``;
- KV: V0 allocates one uniform per-token cache for every layer (``CacheEngine`` over
  ``num_hidden_layers``; the cross-attention layers' encoder states take slots of the same
  blocks), so bytes per token = layers × 2 × KV heads × head size × dtype;
- vision (``MllamaVisionModel``): patch embedding (no bias), class embedding, the gated position
  embedding (patches × h) with its tile table ((aspect ratios + 1) × tiles × patches × h), the
  pre- and post-tile aspect-ratio embeddings, two LayerNorms, ``num_hidden_layers`` local and
  ``num_global_layers`` gated encoder layers (q/k/v/o without bias, CLIP MLP with biases, two
  LayerNorms), and the projector Linear(vision_output_dim → hidden, bias).

The profile's image activation: V0's ``EncoderDecoderModelRunner.profile_run`` gives each of the
``max_num_seqs`` dummy sequences a full-size image (``max_num_tiles`` tiles of
``(image_size / patch_size)² + 1`` patches, padded to a multiple of 8), encoded in one pass with a
dense (tiles × padded patches)² attention mask per image. ``IMAGE_PEAK_PER_SEQ`` is an estimate:
fitted on S005 (36.63 GiB at 128 sequences, one record), range ×0.7-×1.4.

A count of the live tensors in the vision forward of the V0 model file (the 0.8-0.10 mllama.py;
T = tiles × padded patches = 6,432, h = 1,280, i = 5,120, bf16) brackets it: the mask T²·2 B
(0.077 GiB) and the five kept intermediate states 5·T·h·2 B (0.077 GiB) live through the local
layers, where one layer adds its residual and hidden state (2·T·h·2 B) and the MLP's fc1 and GELU
outputs (2·T·i·2 B): 0.307 GiB per image; in the global layers the stacked copy of the
intermediates is alive beside the originals (the encoder's output tuple still holds them):
0.384 GiB. The logged 0.286 GiB per sequence is below both (allocator reuse the count does not
see), so the fitted value is shipped and the range's top (×1.4 = 0.40 GiB) covers the count.
"""

from __future__ import annotations

from oomguard.model.architectures import register
from oomguard.model.architectures.builder import build_description
from oomguard.model.architectures.common import head_size, max_len_from_keys, need, num_kv_heads, rope_scaling
from oomguard.model.description import AttentionLayer, LayerKind, ModelDescription
from oomguard.units import GiB

LAST_RELEASE = (0, 10, 2)
REASON_AFTER = ("vLLM removed Llama-3.2-Vision (MllamaForConditionalGeneration) with the V0 engine in 0.11: its registry "
                "lists it among the previously supported architectures, last served by 0.10.2; plan it with "
                "--vllm-version 0.10.2 or earlier")
# Estimate, fitted on record S005 (vllm PR #12126: 36.63 GiB peak at max_num_seqs 128, 4 tiles of
# 1601 patches per sequence); range ×0.7-×1.4 (RANGE: its top covers the live-tensor count above).
# Per sequence, the whole profile peak.
IMAGE_PEAK_PER_SEQ = 36.63 / 128 * GiB
RANGE = (0.7, 1.4)
FITTED_CONSTANTS = {"IMAGE_PEAK_PER_SEQ": "S005 (vllm PR #12126: 36.63 GiB profile peak at 128 sequences, H100, 0.7.0)"}
# Before 0.7.0 (PR #12126) the profile over-counted: 256 sequences failed on 80 GB cards (vllm#9445,
# 0.6.3), 128 at 65,536 tokens failed on an H100 ("before this PR"), 32 started; so the per-sequence
# peak then was at least ~0.32 GiB (the H100 failure) and is not known above: the range widens.
OVERCOUNT_BEFORE = (0, 7, 0)
RANGE_BEFORE_07 = (1.0, 2.5)


def vision_tower_params(vis: dict, text_hidden: int) -> int:
    h = int(vis.get("hidden_size") or 1280)
    i = int(vis.get("intermediate_size") or 4 * h)
    patch, image = int(vis.get("patch_size") or 14), int(vis.get("image_size") or 560)
    tiles, ch = int(vis.get("max_num_tiles") or 4), int(vis.get("num_channels") or 3)
    ratios = len(vis.get("supported_aspect_ratios") or [0] * 8) + 1  # max_aspect_ratio_id + 1 rows
    patches = (image // patch) ** 2 + 1
    layer = 4 * h * h + (2 * h * i + i + h) + 4 * h  # attention, CLIP MLP with biases, two LayerNorms
    local, glob = int(vis.get("num_hidden_layers") or 32), int(vis.get("num_global_layers") or 8)
    out_dim = int(vis.get("vision_output_dim") or h * (1 + len(vis.get("intermediate_layers_indices") or [])))
    return (ch * patch * patch * h + h  # patch embedding, class embedding
            + 1 + patches * h + ratios * tiles * patches * h  # gated position embedding and its tile table
            + 2 * (ratios * tiles * h + 1)  # pre- / post-tile aspect-ratio embeddings
            + 4 * h  # layernorm_pre / layernorm_post
            + local * layer + glob * (layer + 2)  # the global layers' two gates
            + out_dim * text_hidden + text_hidden)  # multi_modal_projector


def image_tokens_per_seq(vis: dict) -> int:
    """Patches one dummy image gives the V0 profile: tiles × (patches + class token), padded to 8."""
    patches = (int(vis.get("image_size") or 560) // int(vis.get("patch_size") or 14)) ** 2 + 1
    return int(vis.get("max_num_tiles") or 4) * (patches + (8 - patches % 8) % 8)


def image_live_tensor_bytes(vis: dict, dtype_bytes: int = 2) -> tuple[int, int]:
    """(local layers, global layers) live bytes of one image's vision forward, counted from the
    model file (module docstring): the cross-check of the fitted IMAGE_PEAK_PER_SEQ, not the estimate."""
    T, h = image_tokens_per_seq(vis), int(vis.get("hidden_size") or 1280)
    i = int(vis.get("intermediate_size") or 4 * h)
    kept = len(vis.get("intermediate_layers_indices") or [0] * 5) * T * h
    local = T * T + kept + 2 * T * h + 2 * T * i
    return local * dtype_bytes, (local + kept) * dtype_bytes


@register("mllama", "mllama_text_model")
def describe_mllama(config: dict, cfg: dict, *, source: str, name: str, hf_quant: dict | None) -> ModelDescription:
    mt = "mllama"
    H = int(need(cfg, "hidden_size", what="hidden size", model_type=mt))
    n = int(need(cfg, "num_hidden_layers", what="layer count", model_type=mt))
    heads = int(need(cfg, "num_attention_heads", what="attention heads", model_type=mt))
    vocab = int(need(cfg, "vocab_size", what="vocabulary size", model_type=mt))
    kv = num_kv_heads(cfg, heads)
    hd = head_size(cfg, H, heads)
    inter = int(need(cfg, "intermediate_size", what="MLP width", model_type=mt))
    cross = [int(i) for i in cfg.get("cross_attention_layers") or []]
    vis = config.get("vision_config") or {}
    from oomguard.model.architectures.common import pad_vocab

    layers = tuple(AttentionLayer(LayerKind.FULL, kv, hd, hd) for _ in range(n))
    # the 8 image-token rows of the embedding (padded with it) and the cross layers' two gates
    extra = (pad_vocab(vocab + 8) - pad_vocab(vocab)) * H + 2 * len(cross)
    vision = vision_tower_params(vis, H) if vis else 0
    return build_description(
        config, cfg, name=name, source=source, model_type=mt, hf_quant=hf_quant, max_len=max_len_from_keys(cfg),
        rope=rope_scaling(cfg), multimodal=bool(vis),
        family="mllama",
        hidden_size=H,
        num_layers=n,
        num_attention_heads=heads,
        num_kv_heads=kv,
        head_size=hd,
        intermediate_size=inter,
        vocab_size=vocab,
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        layers=layers,
        vision_params=vision,
        extra_params={"unquantized": [extra, False]},
        served_until=(LAST_RELEASE, REASON_AFTER),
        v0_only=True,
        notes=(f"Llama-3.2-Vision: {len(cross)} of the {n} layers attend to the image (cross-attention); V0 keeps a "
               "per-token cache for every layer; its profile encodes one full-size image per sequence "
               f"({image_tokens_per_seq(vis)} patches)",),
    )
