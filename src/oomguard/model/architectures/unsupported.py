"""Architectures we recognise but do not model yet, with the reason.

Refusing with a precise reason beats a confident wrong number.
"""

from __future__ import annotations

from oomguard.errors import UnsupportedModelError
from oomguard.model.architectures import register

# mllama has its adapter now (architectures/mllama.py, with the release gate). Nothing is listed:
# the mechanism stays for an architecture recognised but not modelled.
_REASONS: dict[str, str] = {}


def _refuse(config: dict, cfg: dict, *, source: str, name: str, hf_quant: dict | None):
    mt = str(cfg.get("model_type") or config.get("model_type"))
    raise UnsupportedModelError(f"{source}: {_REASONS.get(mt, mt + ' is not modelled')}")


register(*_REASONS)(_refuse)
