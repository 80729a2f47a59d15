"""A model's own RoPE-scaling recipe: how it reaches beyond its native context.

vLLM refuses a ``--max-model-len`` above what it derives from the config unless
``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``; the variable alone only silences the check
(vLLM's own warning: positions beyond the trained ones give NaNs or garbage).
The right edit is the scaling the model's authors published, with the factor
the length needs. Recipes come from the model cards, keyed by ``model_type``;
a model without one is not offered a longer context.
"""

from __future__ import annotations

import math

# model_type -> (original_max_position_embeddings, largest factor documented, source)
YARN_RECIPES: dict[str, tuple[int, float, str]] = {
    "qwen3": (32768, 4.0, "Qwen3 model cards: rope_scaling yarn, factor 4.0, original_max_position_embeddings 32768 (131,072 tokens)"),
    "qwen3_moe": (32768, 4.0, "Qwen3 MoE model cards: rope_scaling yarn, factor 4.0, original_max_position_embeddings 32768"),
    "qwen2": (32768, 4.0, "Qwen2.5 model cards: rope_scaling yarn, factor 4.0, original_max_position_embeddings 32768 (131,072 tokens)"),
}


def needed_factor(length: int, original: int) -> float:
    """``length / original`` rounded up to 0.5 (YaRN factors are published in halves)."""
    return max(1.0, math.ceil(length / original * 2 - 1e-9) / 2)


def yarn_recipe(model, length: int) -> tuple[dict | None, str]:
    """(rope_scaling dict, why) for serving ``length`` tokens; (None, why not) when the model has no
    recipe that reaches it or already scales its positions."""
    if getattr(model, "rope_scaling", None):
        return None, "the config already sets rope_scaling"
    rec = YARN_RECIPES.get(getattr(model, "model_type", "") or "")
    if rec is None:
        return None, f"no published RoPE-scaling recipe for model_type {getattr(model, 'model_type', '?')!r}"
    original, most, source = rec
    f = needed_factor(length, original)
    if f > most:
        return None, f"{length:,} tokens need YaRN factor {f:g}, beyond the {most:g} the model card documents ({source})"
    return {"rope_type": "yarn", "factor": f, "original_max_position_embeddings": original}, source
