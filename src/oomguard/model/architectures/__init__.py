"""Architecture adapters: Hugging Face config -> ``ModelDescription``.

Each adapter module registers the ``model_type`` values it has been checked
on (``register``). A type no adapter registers goes to the generic path
(``generic.py``): standard fields only, and the description says so
(``coverage = "generic"`` with its assumptions), so every plan built from it
carries the mark; what the generic path cannot read is refused with the reason.
Never a silent dense-model guess.
"""

from __future__ import annotations

from collections.abc import Callable

from oomguard.errors import UnsupportedModelError
from oomguard.model.description import ModelDescription

Adapter = Callable[..., ModelDescription]
_REGISTRY: dict[str, Adapter] = {}


def register(*model_types: str):
    def deco(fn: Adapter) -> Adapter:
        for t in model_types:
            _REGISTRY[t] = fn
        return fn

    return deco


def _load_adapters() -> None:
    if _REGISTRY:
        return
    from oomguard.model.architectures import decoder, deepseek_v4, encoder, gemma4, llama4, mamba, mla, mllama, unsupported  # noqa: F401  (registration)


def supported_model_types() -> list[str]:
    _load_adapters()
    return sorted(_REGISTRY)


def describe(config: dict, *, source: str, name: str, hf_quant: dict | None = None, force_generic: bool = False) -> ModelDescription:
    """Normalise a config.json dictionary (plus optional hf_quant_config.json).

    ``force_generic``: use the generic path even where an adapter exists (the registry sweep
    measures how far generic is from vLLM on every architecture, docs/models.md)."""
    _load_adapters()
    if not isinstance(config, dict):
        raise UnsupportedModelError(f"{source}: config.json is not a JSON object")
    from oomguard.model.architectures.common import text_config

    model_type = str(config.get("model_type") or "")
    text = text_config(config)
    text_type = str(text.get("model_type") or "") if text is not config else ""
    adapter = None if force_generic else (_REGISTRY.get(text_type) or _REGISTRY.get(model_type))
    if adapter is None:
        from oomguard.model.architectures.generic import describe_generic

        adapter = describe_generic
        if not force_generic and text is not config and not text_type and model_type:
            text = dict(text, model_type=model_type)

    from oomguard.model.quantization import weight_costs

    desc = adapter(config, text, source=source, name=name, hf_quant=hf_quant)
    costs = weight_costs(desc.quantization, desc.dtype_bytes, config, hf_quant)
    from oomguard.model.architectures.vision import audio_params, vision_profile

    original = text.get("original_max_position_embeddings")
    return desc._replace(category_bytes=dict(costs.per_category), vision=vision_profile(config) if desc.is_multimodal else None,
                   original_max_position_embeddings=int(original) if isinstance(original, (int, float)) and original > 0 else None,
                   audio_params=min(audio_params(config), desc.vision_params) if desc.vision_params else 0)
