"""``--hf-overrides`` applied to the model config the way vLLM does, in one place for every command.

vLLM 0.32 (``config/model.py::ModelConfig.__post_init__``) splits the overrides: flat values go
to ``get_config(hf_overrides_kw=...)`` (``config.update`` before the RoPE parameters are
standardised), dict values are set on the loaded config by ``_apply_dict_overrides`` (a nested
config such as ``text_config`` is updated key by key). The text config then feeds
``_get_and_verify_max_len``: ``max_position_embeddings`` (or the other length keys), scaled by
the RoPE factor for the types that scale it (``architectures.common.derive_max_model_len``, per
release). Releases up to 0.11.1 also took ``--rope-scaling``, which vLLM folded into
``hf_overrides["rope_scaling"]``.

The memory model reads only the fields that change a plan: the RoPE scaling, the position
limit, and the same two inside ``text_config``. ``plan``, ``check`` and ``fit`` all call
``apply_overrides`` (via ``plan_launch``), so one launch gets one derived maximum everywhere.
"""

from __future__ import annotations

import json

from oomguard.errors import InputError

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from typing import Any

# The override keys that change what the planner computes.
ROPE_KEYS = ("rope_scaling", "rope_parameters")
LENGTH_KEYS = ("max_position_embeddings",)
# YaRN variants: the factor stretches ``original_max_position_embeddings`` (their reach); vLLM
# 0.30+ no longer multiplies the derived length by it (the config's length is taken as scaled).
YARN_TYPES = ("yarn", "deepseek_yarn")


def json_object(value: Any, option: str) -> dict:
    """A JSON-object flag value as a dict (launch readers may hand over the JSON text)."""
    if value is None or value == "":
        return {}
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError as exc:
            raise InputError(f"{option}: not valid JSON ({exc.msg} at character {exc.pos}): {value[:80]!r}") from None
        if not isinstance(parsed, dict):
            raise InputError(f"{option}: expected a JSON object like '{{\"rope_scaling\": {{...}}}}', got {type(parsed).__name__}")
        return parsed
    raise InputError(f"{option}: expected a JSON object, got {type(value).__name__}")


def hf_overrides_of(flags: dict) -> dict:
    """The launch's ``--hf-overrides`` as a dict, with a ``--rope-scaling`` (≤ 0.11.1) folded in
    the way vLLM did (``hf_overrides["rope_scaling"]``, the explicit override winning)."""
    over = json_object(flags.get("hf_overrides"), "--hf-overrides")
    rope = json_object(flags.get("rope_scaling"), "--rope-scaling") if flags.get("rope_scaling") not in (None, "") else {}
    if rope and "rope_scaling" not in over and "rope_parameters" not in over:
        over["rope_scaling"] = rope
    return over


def _modelled(over: dict) -> tuple[dict | None, int | None]:
    """(rope scaling, max_position_embeddings) an override sets, top level first, then text_config."""
    from oomguard.model.architectures.common import rope_scaling

    rope = mpe = None
    for scope in (over, over.get("text_config") if isinstance(over.get("text_config"), dict) else {}):
        for key in ROPE_KEYS:
            if rope is None and isinstance(scope.get(key), dict):
                rope = rope_scaling({"rope_scaling": scope[key]})
        v = scope.get("max_position_embeddings")
        if mpe is None and v is not None:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0 or v != int(v):
                raise InputError(f"--hf-overrides: max_position_embeddings must be a positive integer, got {v!r}")
            mpe = int(v)
    return rope, mpe


def apply_overrides(model, flags: dict, version: tuple[int, int, int] | None = None):
    """The model as vLLM sees it after the launch's ``--hf-overrides`` / ``--rope-scaling``.

    Idempotent: applying it to its own result changes nothing. ``version`` picks the release's
    rule for deriving the maximum length (``derived_max_model_len``); None is the newest."""
    from oomguard.model.architectures.common import derive_max_model_len

    over = hf_overrides_of(flags)
    if not over:
        return model
    rope, mpe = _modelled(over)
    changes: dict = {}
    if rope is not None and rope != model.rope_scaling:
        changes["rope_scaling"] = rope
    if mpe is not None and mpe != model.max_position_embeddings:
        changes["max_position_embeddings"] = mpe
    if not changes:
        return model
    m = model._replace(**changes)
    new_rules = version is None or tuple(version) >= (0, 30, 0)
    return m._replace(derived_max_model_len=derive_max_model_len(m.max_position_embeddings, m.rope_scaling, m.model_type, new_rules=new_rules))


def unmodelled_keys(flags: dict) -> list[str]:
    """Override keys the planner does not read (said in the plan, never silently dropped)."""
    over = hf_overrides_of(flags)
    out = [k for k in over if k not in (*ROPE_KEYS, *LENGTH_KEYS, "text_config")]
    tc = over.get("text_config")
    if isinstance(tc, dict):
        out += [f"text_config.{k}" for k in tc if k not in (*ROPE_KEYS, *LENGTH_KEYS)]
    return out


def rope_reach(model) -> int | None:
    """How many positions the model's RoPE scaling covers (None without scaling): YaRN stretches
    ``original_max_position_embeddings`` by ``factor``; Llama-3 and LongRoPE configs carry the scaled
    length already; the types vLLM scales the derived length by (linear, dynamic) reach that length."""
    rope = model.rope_scaling
    if not rope:
        return None
    rtype = str(rope.get("rope_type") or rope.get("type") or "")
    if rtype in ("", "default", "mrope"):
        return None
    factor = float(rope.get("factor") or 1.0)
    if rtype in YARN_TYPES:
        orig = rope.get("original_max_position_embeddings") or model.max_position_embeddings or 0
        return int(float(orig) * factor)
    if rtype in ("longrope", "llama3"):  # the config's length is the scaled one already
        return int(model.max_position_embeddings or 0)
    return int((model.max_position_embeddings or 0) * factor)
