"""Rough parameter count of vision / audio towers (for weight memory).

Vision towers vary too much to model per family; a ViT-style count
(depth × (4·h² + 2·h·i)) plus the merger is within a few percent for the
Qwen-VL and SigLIP towers, and they are small next to the language model.
Exact bytes come from safetensors headers when the checkpoint is local.
"""

from __future__ import annotations


def _tower(cfg: dict) -> int:
    depth = int(cfg.get("depth") or cfg.get("num_hidden_layers") or 0)
    h = int(cfg.get("hidden_size") or cfg.get("embed_dim") or 0)
    if not depth or not h:
        return 0
    inter = int(cfg.get("intermediate_size") or 0) or int(h * float(cfg.get("mlp_ratio") or 4))
    patch = int(cfg.get("patch_size") or 14)
    channels = int(cfg.get("in_channels") or cfg.get("num_channels") or 3)
    temporal = int(cfg.get("temporal_patch_size") or 1)
    per_layer = 4 * h * h + 2 * h * inter + 4 * h
    embed = channels * temporal * patch * patch * h
    out = int(cfg.get("out_hidden_size") or 0)
    merge = int(cfg.get("spatial_merge_size") or 0)
    merger = (h * merge * merge) ** 2 + h * merge * merge * out if out and merge else 0
    return depth * per_layer + embed + merger


def vision_params(config: dict) -> int:
    total = 0
    for key in ("vision_config", "audio_config"):
        sub = config.get(key)
        if isinstance(sub, dict):
            total += _tower(sub)
    return total
