"""Architectures we recognise but do not model yet, with the reason.

Refusing with a precise reason beats a confident wrong number.
"""

from __future__ import annotations

from oomguard.errors import UnsupportedModelError
from oomguard.model.architectures import register

_REASONS = {
    # vLLM's registry lists MllamaForConditionalGeneration among the previously supported models
    # (model_executor/models/registry.py @0.32: last served by 0.10.2, with the V0 engine)
    "mllama": "Llama-3.2-Vision (MllamaForConditionalGeneration) is served by vLLM only up to 0.10.2 (V0 "
              "encoder-decoder); its cross-attention encoder caches are not modelled for those releases either",
    "mllama_text_model": "Llama-3.2-Vision (MllamaForConditionalGeneration) is served by vLLM only up to 0.10.2 (V0 "
                         "encoder-decoder); its cross-attention encoder caches are not modelled for those releases either",
}


def _refuse(config: dict, cfg: dict, *, source: str, name: str, hf_quant: dict | None):
    mt = str(cfg.get("model_type") or config.get("model_type"))
    raise UnsupportedModelError(f"{source}: {_REASONS.get(mt, mt + ' is not modelled')}")


register(*_REASONS)(_refuse)
