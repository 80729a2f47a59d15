"""The one builder of a ``ModelDescription``: the fields every adapter reads the same way.

An adapter passes what only it knows (shape, layers, MoE, flags); identity, dtype,
quantization, context bounds and the multimodal towers are read here, once.
"""

from __future__ import annotations

from oomguard.model.architectures.common import derive_max_model_len, first_architecture, model_dtype
from oomguard.model.architectures.vision import vision_params
from oomguard.model.description import ModelDescription
from oomguard.model.quantization import parse_quantization

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from typing import Any


def build_description(config: dict, cfg: dict, *, name: str, source: str, model_type: str, hf_quant: dict | None,
                      max_len: int | None, rope: dict | None, multimodal: bool = False, **fields: Any) -> ModelDescription:
    """A ``ModelDescription`` with the fields every adapter reads the same way, plus the adapter's own.

    Shared: the identity (name, source, model_type, first architecture), the checkpoint dtype
    (``model_dtype``) and quantization (``parse_quantization``), the context bounds
    (``max_position_embeddings`` = ``max_len``, vLLM's derived length from it and ``rope``, the
    rope scaling) and, for a multimodal wrapper, the towers' parameters (``vision_params``).
    ``fields``: the shape, layers, MoE and flags only the adapter knows; a field given there
    wins over the shared reading (the encoder's derived length, Gemma-4's towers).
    """
    shared: dict[str, Any] = {
        "name": name,
        "source": source,
        "model_type": model_type,
        "architecture": first_architecture(config),
        "dtype": model_dtype(config, cfg),
        "max_position_embeddings": max_len,
        "rope_scaling": rope,
        "quantization": parse_quantization(config, hf_quant, cfg),
        "is_multimodal": bool(multimodal),
    }
    if "derived_max_model_len" not in fields:
        shared["derived_max_model_len"] = derive_max_model_len(max_len, rope, model_type)
    if "vision_params" not in fields:
        shared["vision_params"] = vision_params(config) if multimodal else 0
    shared.update(fields)
    return ModelDescription(**shared)
