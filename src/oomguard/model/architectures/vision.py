"""Parameter count of vision / audio towers and their projectors (for weight memory).

A ViT-style count (depth × (4·h² + 2·h·i), 3·h·i for SwiGLU/GeGLU towers) plus patch embedding,
learned positions, mergers and the wrapper's projector, and a Whisper-style count for audio
encoders. The registry sweep checks each against vLLM 0.32's numel (docs/models.md: most
within 0.1 %); towers not modelled per family fall back to the ViT count.
Exact bytes come from safetensors headers when the checkpoint is local.
"""

from __future__ import annotations


# Towers whose ViT blocks use a SwiGLU MLP (gate_proj, up_proj, down_proj): Qwen2.5-VL's
# Qwen2_5_VisionBlock (models/qwen2_5_vl.py), which the Qwen2.5-Omni thinker reuses. Qwen2-VL and
# Qwen3-VL blocks use fc1/fc2 (linear_fc1/linear_fc2), as SigLIP/CLIP/Pixtral-style towers do.
_GATED_VIT_WRAPPERS = ("qwen2_5_vl", "qwen2_5_omni", "qwen2_5_omni_thinker")
# LLaVA-style projectors (models/llava.py LlavaMultiModalProjector, mistral3.py): linear_1
# vision width → LM width, linear_2 LM width → LM width; Mistral-3 adds the patch merger
# (vision width · merge² → vision width) before them.
_LLAVA_PROJECTOR = ("llava", "llava_next", "llava_next_video", "llava_onevision", "mistral3")
# Keys of the audio encoders vLLM builds (Whisper's encoder, Qwen2-Audio, Qwen3-ASR,
# AudioFlamingo3, Voxtral): they name the width d_model / hidden_size and the layers
# encoder_layers / num_hidden_layers.
_AUDIO_KEYS = ("audio_config", "audio_encoder_config")
TOWER_KEYS = ("vision_config",) + _AUDIO_KEYS


def _glm4v_tower(cfg: dict) -> int:
    """GLM-4.1V / GLM-4.5V vision (models/glm4_1v.py Glm4vVisionTransformer): blocks with q/k/v/o
    and a SwiGLU MLP of out_hidden_size, a learned position per patch, the merge_size² conv
    downsample into out_hidden_size, and the patch merger (proj out², SwiGLU out → intermediate).
    Checked against vLLM 0.32's numel (registry sweep: within 0.1 %)."""
    h, depth = int(cfg.get("hidden_size") or 0), int(cfg.get("depth") or 0)
    out, inter = int(cfg.get("out_hidden_size") or 0), int(cfg.get("intermediate_size") or 0)
    if not (h and depth and out and inter):
        return 0
    patch, merge = _side(cfg.get("patch_size"), 14), int(cfg.get("spatial_merge_size") or 2)
    side = _side(cfg.get("image_size"), 336) // patch
    blocks = depth * (4 * h * h + 3 * h * out + 4 * h)
    embed = int(cfg.get("in_channels") or 3) * int(cfg.get("temporal_patch_size") or 1) * patch * patch * h
    return blocks + embed + side * side * h + h * out * merge * merge + out * out + 3 * out * inter + 2 * out


def _tower(cfg: dict, *, gated: bool = False) -> int:
    if str(cfg.get("model_type") or "") in ("glm4v_vision", "glm4v_moe_vision"):
        return _glm4v_tower(cfg)
    depth = int(cfg.get("depth") or cfg.get("num_hidden_layers") or 0)
    # Qwen2-VL's vision config names the tower width embed_dim and the merger's output hidden_size
    # (the LM's width); SigLIP/CLIP towers have only hidden_size.
    h = int(cfg.get("embed_dim") or cfg.get("hidden_size") or 0)
    if not depth or not h:
        return 0
    inter = int(cfg.get("intermediate_size") or 0) or int(h * float(cfg.get("mlp_ratio") or 4))
    patch = _side(cfg.get("patch_size"), 14)
    channels = int(cfg.get("in_channels") or cfg.get("num_channels") or 3)
    temporal = int(cfg.get("temporal_patch_size") or 1)
    per_layer = 4 * h * h + (3 if gated else 2) * h * inter + 4 * h
    embed = channels * temporal * patch * patch * h
    out = int(cfg.get("out_hidden_size") or (cfg.get("hidden_size") if cfg.get("embed_dim") else 0) or 0)
    merge = int(cfg.get("spatial_merge_size") or 0)
    merger = (h * merge * merge) ** 2 + h * merge * merge * out if out and merge else 0
    # Qwen3-VL (models/qwen3_vl.py): one more merger per deepstack layer and a learned position
    # embedding of num_position_embeddings rows.
    deepstack = cfg.get("deepstack_visual_indexes")
    merger *= 1 + (len(deepstack) if isinstance(deepstack, list) else 0)
    pos = int(cfg.get("num_position_embeddings") or 0) * h
    # Gemma-4's vision encoder: a 2-D factorised position table (2 × position_embedding_size rows)
    pos += 2 * int(cfg.get("position_embedding_size") or 0) * h
    if not pos and cfg.get("image_size") and not merge and cfg.get("model_type") != "pixtral":  # Pixtral: 2-D RoPE
        # a learned position per patch (SigLIP, CLIP and InternViT add a class token's)
        side = _side(cfg["image_size"], 0) // patch
        pos = (side * side + (1 if cfg.get("model_type") in _CLASS_TOKEN else 0)) * h
    return depth * per_layer + embed + merger + pos


_CLASS_TOKEN = ("clip_vision_model", "internvl_vision")


def _side(value, default: int) -> int:
    """A square side from a size field: 448, or [448, 448] ([h, w]: InternVL, Pixtral)."""
    if isinstance(value, (list, tuple)):
        value = value[0] if value else None
    return int(value or default)


def _audio_tower(cfg: dict, text_hidden: int) -> int:
    """A Whisper-style audio encoder (models/whisper.py WhisperEncoder, qwen2_audio.py, ...):
    conv1 (mel bins → d, kernel 3), conv2 (d → d, kernel 3), learned positions
    (max_source_positions × d), per layer q/k/v/o (4·d²) and fc1/fc2 (2·d·ffn) with biases and two
    LayerNorms, and the projector into the language model (d × its hidden size, or output_dim).
    Checked against vLLM 0.32's weight numel (registry sweep: Qwen2-Audio within 0.1 %)."""
    d = int(cfg.get("d_model") or cfg.get("hidden_size") or 0)
    depth = int(cfg.get("encoder_layers") or cfg.get("num_hidden_layers") or 0)
    if not d or not depth:
        return 0
    ffn = int(cfg.get("encoder_ffn_dim") or cfg.get("intermediate_size") or 4 * d)
    mel = int(cfg.get("num_mel_bins") or 80)
    per_layer = 4 * d * d + 2 * d * ffn + 9 * d + ffn
    front = mel * d * 3 + d * d * 3 + 2 * d + int(cfg.get("max_source_positions") or 1500) * d
    out = int(cfg.get("output_dim") or text_hidden or 0)
    return depth * per_layer + front + 2 * d + d * out + out


def _feature_layers(sub: dict, feature) -> dict:
    """LLaVA-style wrappers build the tower only up to the deepest feature layer they read
    (models/llava.py _get_num_hidden_layers, utils.get_layer_index: -2 of 24 → 23 layers)."""
    n = int(sub.get("num_hidden_layers") or 0)
    idx = feature if isinstance(feature, list) else [feature]
    if not n or not idx or not all(isinstance(i, int) and not isinstance(i, bool) for i in idx):
        return sub
    return dict(sub, num_hidden_layers=max(n + i + 1 if i < 0 else i for i in idx))


def audio_params(config: dict) -> int:
    """The audio towers' share of ``vision_params`` (the part --language-model-only keeps)."""
    from oomguard.model.architectures.common import text_config

    text_hidden = int(text_config(config).get("hidden_size") or 0)
    holders = [config] + ([config["thinker_config"]] if isinstance(config.get("thinker_config"), dict) else [])
    return sum(_audio_tower(h[k], text_hidden) for h in holders for k in _AUDIO_KEYS if isinstance(h.get(k), dict))


def vision_params(config: dict) -> int:
    from oomguard.model.architectures.common import text_config

    total = 0
    holders = [config] + ([config["thinker_config"]] if isinstance(config.get("thinker_config"), dict) else [])
    text_hidden = int(text_config(config).get("hidden_size") or 0)
    for holder in holders:  # Omni models keep their towers in the thinker's config
        wrapper = str(holder.get("model_type") or config.get("model_type") or "")
        sub = holder.get("vision_config")
        if isinstance(sub, dict):
            # Pixtral's transformer blocks use w1/w2/w3 SwiGLU (models/pixtral.py FeedForward),
            # Gemma-4's vision encoder a GeGLU gate/up/down (models/gemma4_mm.py)
            gated = wrapper in _GATED_VIT_WRAPPERS or "fullatt_block_indexes" in sub or sub.get("model_type") in ("pixtral", "gemma4_vision")
            if wrapper in _LLAVA_PROJECTOR:
                sub = _feature_layers(sub, holder.get("vision_feature_layer"))
            total += _tower(sub, gated=gated)
            vh = int(sub.get("hidden_size") or 0)
            if wrapper == "internvl" and vh and text_hidden:
                # models/interns1.py InternS1MultiModalProjector: LayerNorm and linear_1 over the
                # pixel-shuffled width (vision width / downsample_ratio²), linear_2 LM → LM
                wide = int(vh / float(holder.get("downsample_ratio") or 0.5) ** 2)
                total += 2 * wide + wide * text_hidden + text_hidden * text_hidden + 2 * text_hidden
            if wrapper == "cohere2_vision" and vh and text_hidden and holder.get("alignment_intermediate_size"):
                # models/cohere2_vision.py Cohere2VisionMultiModalProjector: pixel shuffle by
                # downsample_factor, linear_1 (merged gate/up of alignment_intermediate_size in
                # all), SiLU-and-mul, linear_2 (half of it) into the LM
                wide = vh * int(holder.get("downsample_factor") or 2) ** 2
                align = int(holder["alignment_intermediate_size"])
                total += wide * align + align + (align // 2) * text_hidden + text_hidden
            if wrapper in ("idefics3", "smolvlm") and vh and text_hidden:
                # models/idefics3.py Idefics3Connector: pixel shuffle by scale_factor, one
                # bias-free linear into the LM
                total += vh * int(holder.get("scale_factor") or 2) ** 2 * text_hidden
            if wrapper == "gemma4" and vh and text_hidden:
                total += vh * text_hidden  # models/gemma4_mm.py Gemma4MultimodalEmbedder's projection
            if wrapper == "kimi_vl" and vh and text_hidden:
                # models/kimi_vl.py KimiVLMultiModalProjector: LayerNorm + linear_1 over the
                # merge_kernel_size-shuffled width, linear_2 into the LM; MoonViT's learned
                # init_pos_emb_height × init_pos_emb_width positions
                k = sub.get("merge_kernel_size") or [2, 2]
                wide = vh * int(k[0]) * int(k[-1]) if isinstance(k, list) and k else vh * 4
                total += 2 * wide + wide * wide + wide + wide * text_hidden + text_hidden
                total += int(sub.get("init_pos_emb_height") or 0) * int(sub.get("init_pos_emb_width") or 0) * vh
            if wrapper in _LLAVA_PROJECTOR and vh and text_hidden:
                merge = int(holder.get("spatial_merge_size") or 0) if wrapper == "mistral3" else 0
                total += vh * text_hidden + text_hidden * text_hidden + 2 * text_hidden + vh * merge * merge * vh
        for key in _AUDIO_KEYS:
            sub = holder.get(key)
            if isinstance(sub, dict):
                total += _audio_tower(sub, text_hidden)
    return total


# Qwen2-VL / Qwen2.5-VL / Qwen3-VL processors default to max_pixels 12,845,056 (patch 14) or
# 16,777,216 (patch 16): 65,536 patches, 16,384 tokens after the 2×2 merge. vLLM profiles the
# encoder with the largest item the processor can produce.
_QWEN_VL_MAX_PATCHES = 65536


def vision_profile(config: dict) -> dict | None:
    """Dimensions of the vision tower's profile-run item: hidden, intermediate, patches, tokens."""
    v = config.get("vision_config")
    if not isinstance(v, dict):
        return None
    h = int(v.get("hidden_size") or v.get("embed_dim") or 0)
    depth = int(v.get("depth") or v.get("num_hidden_layers") or 0)
    if not h or not depth:
        return None
    inter = int(v.get("intermediate_size") or 0) or int(h * float(v.get("mlp_ratio") or 4))
    merge = int(v.get("spatial_merge_size") or 0)
    patch = _side(v.get("patch_size"), 14)
    if merge:
        patches = _QWEN_VL_MAX_PATCHES
        tokens = patches // (merge * merge)
    elif v.get("image_size"):
        size = v["image_size"]
        # [height, width] (InternVL) or square; not ``h``: that is the tower's hidden size, returned below
        ih, iw = (size[0], size[-1]) if isinstance(size, list) else (size, size)
        patches = (int(ih) // patch) * (int(iw) // patch)
        tokens = int(config.get("mm_tokens_per_image") or patches)
    else:
        return None
    # a merge or patch wider than the image leaves no token: the item still is one (and is divided by)
    return {"hidden": h, "intermediate": inter, "patches": patches, "tokens": max(1, tokens), "depth": depth}
