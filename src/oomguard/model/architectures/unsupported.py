"""Architectures we recognise but do not model yet, with the reason.

Refusing with a precise reason beats a confident wrong number.
"""

from __future__ import annotations

from oomguard.errors import UnsupportedModelError
from oomguard.model.architectures import register

_REASONS = {
    "mllama": "Llama-3.2-Vision cross-attention layers (encoder-length caches) are not modelled yet",
    "mllama_text_model": "Llama-3.2-Vision cross-attention layers (encoder-length caches) are not modelled yet",
}


def _refuse(config: dict, cfg: dict, *, source: str, name: str, hf_quant: dict | None):
    mt = str(cfg.get("model_type") or config.get("model_type"))
    raise UnsupportedModelError(f"{source}: {_REASONS.get(mt, mt + ' is not modelled')}")


register(*_REASONS)(_refuse)
