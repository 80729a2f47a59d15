"""Rough parameter count of vision / audio towers (for weight memory).

Vision towers vary too much to model per family; a ViT-style count
(depth × (4·h² + 2·h·i)) plus the merger is within a few percent for the
Qwen-VL and SigLIP towers, and they are small next to the language model.
Exact bytes come from safetensors headers when the checkpoint is local.
"""

from __future__ import annotations


def _tower(cfg: dict) -> int:
    depth = int(cfg.get("depth") or cfg.get("num_hidden_layers") or 0)
    # Qwen2-VL's vision config names the tower width embed_dim and the merger's output hidden_size
    # (the LM's width); SigLIP/CLIP towers have only hidden_size.
    h = int(cfg.get("embed_dim") or cfg.get("hidden_size") or 0)
    if not depth or not h:
        return 0
    inter = int(cfg.get("intermediate_size") or 0) or int(h * float(cfg.get("mlp_ratio") or 4))
    patch = int(cfg.get("patch_size") or 14)
    channels = int(cfg.get("in_channels") or cfg.get("num_channels") or 3)
    temporal = int(cfg.get("temporal_patch_size") or 1)
    per_layer = 4 * h * h + 2 * h * inter + 4 * h
    embed = channels * temporal * patch * patch * h
    out = int(cfg.get("out_hidden_size") or (cfg.get("hidden_size") if cfg.get("embed_dim") else 0) or 0)
    merge = int(cfg.get("spatial_merge_size") or 0)
    merger = (h * merge * merge) ** 2 + h * merge * merge * out if out and merge else 0
    return depth * per_layer + embed + merger


def vision_params(config: dict) -> int:
    total = 0
    holders = [config] + ([config["thinker_config"]] if isinstance(config.get("thinker_config"), dict) else [])
    for holder in holders:  # Omni models keep their towers in the thinker's config
        for key in ("vision_config", "audio_config"):
            sub = holder.get(key)
            if isinstance(sub, dict):
                total += _tower(sub)
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
    patch = int(v.get("patch_size") or 14)
    if merge:
        patches = _QWEN_VL_MAX_PATCHES
        tokens = patches // (merge * merge)
    elif v.get("image_size"):
        size = v["image_size"]
        h, w = (size[0], size[-1]) if isinstance(size, list) else (size, size)  # [h, w] (InternVL) or square
        patches = (int(h) // patch) * (int(w) // patch)
        tokens = int(config.get("mm_tokens_per_image") or patches)
    else:
        return None
    return {"hidden": h, "intermediate": inter, "patches": patches, "tokens": tokens, "depth": depth}
