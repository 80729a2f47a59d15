"""JSON-valued vLLM flags: parsed safely, and the fields oomguard reads checked for their type.

``--hf-overrides``, ``--kv-transfer-config``, ``--compilation-config``,
``--speculative-config`` (and every other flag vLLM parses with ``json.loads``)
arrive as text on a command line or as a mapping in YAML. Either way the value
is checked here, once, before any command looks inside it:

- the text is JSON read by ``oomguard.numbers.json_loads`` (no ``NaN`` /
  ``Infinity`` / ``1e999``, integers digit-capped), at most ``MAX_DEPTH`` levels deep;
- the four flags above are JSON objects (vLLM builds a config from them:
  ``KVTransferConfig(**value)``; ``--hf-overrides`` is merged into the model's
  config). ``--hf-overrides`` / ``--rope-scaling`` are validated as a config.json is
  (``model_config.validate_config``: the fields the memory model reads); the fields
  oomguard reads of the other three have the type vLLM declares for them
  (``FIELDS``, from vLLM 0.32's ``config/kv_transfer.py``, ``config/speculative.py``
  and ``config/compilation.py``), numbers among them at most 2**53. Other fields
  pass through unchecked: vLLM validates them itself, and oomguard does not read them.

A value that fails is one ``InputError`` naming the option, the field and what
was expected (the caller adds the file and line).
"""

from __future__ import annotations

import json
import math
import re

from oomguard.errors import InputError

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from typing import Any

MAX_DEPTH = 64
MAX_MAGNITUDE = 2**53  # the launch's other numbers have the same bound (oomguard.inputs.command)
_MAX_DIGITS = 40

# vLLM reads these with union_dict_and_str (engine/arg_utils.py): text shaped like {...} is JSON, else a string.
DICT_OR_STR = frozenset({"hf_overrides"})

# Merged into the model's config by vLLM: checked as a config.json would be.
CONFIG_OVERRIDES = frozenset({"hf_overrides", "rope_scaling"})
# Flags whose value must be a JSON object, and the fields oomguard reads, with vLLM's types.
FIELDS: dict[str, dict[str, Any]] = {
    "kv_transfer_config": {
        "kv_connector": "str",
        "kv_role": "str",
        "kv_connector_extra_config": {"cpu_bytes_to_use": "size", "num_cpu_blocks": "size", "block_size": "count"},
    },
    "speculative_config": {
        "num_speculative_tokens": "count",
        "method": "str",
        "model": "str",
        "draft_tensor_parallel_size": "count",
        "max_model_len": "count",
    },
    "compilation_config": {
        "cudagraph_mode": "str",
        "cudagraph_capture_sizes": "count-list",
        "max_cudagraph_capture_size": "size",
        "level": "size",
        "mode": "size",
    },
}
# compilation_config also takes a bare optimisation level (-O3 / --compilation-config 3) in the releases that had it.
_SCALAR_OK = {"compilation_config": (int,)}

_KIND_TEXT = {
    "str": "a string",
    "number": "a finite number",
    "count": "a positive integer",
    "size": "a non-negative integer",
    "count-list": "a list of positive integers",
    dict: "a JSON object",
}


def loads(text: str) -> Any:
    """JSON from a flag: ``numbers.json_loads`` (finite numbers, digit-capped integers) and a depth
    limit; ValueError otherwise."""
    from oomguard.numbers import json_loads

    try:
        value = json_loads(text)
    except RecursionError:
        raise ValueError(f"nested more than {MAX_DEPTH} levels") from None
    if _depth(value) > MAX_DEPTH:
        raise ValueError(f"nested more than {MAX_DEPTH} levels")
    return value


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            deepest = max(deepest, d)
            if deepest > MAX_DEPTH:
                return deepest
            stack.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v))
    return deepest


def looks_like_object(text: str) -> bool:
    """vLLM's test for a dict-or-string flag's value being JSON (``^\\s*{.*}\\s*$``)."""
    return re.match(r"(?s)^\s*\{.*\}\s*$", text) is not None


def _kind_of(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true/false"
    if isinstance(v, (int, float)):
        return f"the number {v!r}"
    if isinstance(v, str):
        return "a string" if len(v) > 40 else f"the string {v!r}"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


def _check_scalar(kind: str, v: Any) -> bool:
    if v is None:
        return True  # vLLM's "not set" for every one of these fields
    if kind == "str":
        return isinstance(v, str)
    if isinstance(v, bool):
        return False
    if kind == "number":
        return isinstance(v, (int, float)) and math.isfinite(v) and abs(v) <= MAX_MAGNITUDE
    if kind in ("count", "size"):
        ok = isinstance(v, int) or (isinstance(v, float) and math.isfinite(v) and v.is_integer())
        return ok and (v >= 1 if kind == "count" else v >= 0) and abs(v) <= MAX_MAGNITUDE
    if kind == "count-list":
        return isinstance(v, list) and all(_check_scalar("count", x) and x is not None for x in v)
    return True


def check_fields(dest: str, value: Any, *, option: str) -> None:
    """The shape of a JSON flag's value: an object where vLLM builds a config from it, and the
    fields oomguard reads of the type vLLM declares. InputError (without file/line) otherwise."""
    if dest in CONFIG_OVERRIDES:
        if not isinstance(value, dict):
            raise InputError(f"{option}: expected a JSON object, found {_kind_of(value)}")
        from oomguard.inputs.model_config import validate_config

        try:
            validate_config(value if dest == "hf_overrides" else {"rope_scaling": value})
        except InputError as exc:
            raise InputError(f"{option}: {exc.message}") from None
        return
    schema = FIELDS.get(dest)
    if schema is None:
        return
    if not isinstance(value, dict):
        if isinstance(value, _SCALAR_OK.get(dest, ())) and not isinstance(value, bool) and 0 <= value <= 3:
            return
        raise InputError(f"{option}: expected a JSON object, found {_kind_of(value)}")
    stack: list[tuple[dict, dict, str]] = [(schema, value, "")]
    while stack:
        fields, obj, prefix = stack.pop()
        for name, kind in fields.items():
            if name not in obj:
                continue
            v = obj[name]
            where = f"{option}: {prefix}{name}"
            if isinstance(kind, dict):
                if v is None:
                    continue
                if not isinstance(v, dict):
                    raise InputError(f"{where}: expected a JSON object, found {_kind_of(v)}")
                stack.append((kind, v, f"{prefix}{name}."))
            elif not _check_scalar(kind, v):
                raise InputError(f"{where}: expected {_KIND_TEXT[kind]}, found {_kind_of(v)}")


def parse(dest: str, text: str, *, option: str) -> Any:
    """A JSON flag's text as data, checked (InputError without file/line on failure)."""
    from oomguard.numbers import NumberError

    try:
        value = loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{option}: {_short(text)!r} is not valid JSON ({exc.msg})") from None
    except NumberError as exc:
        raise InputError(f"{option}: the JSON number {exc}") from None
    except ValueError as exc:
        raise InputError(f"{option}: {exc}") from None
    check_fields(dest, value, option=option)
    return value


def check_data(dest: str, value: Any, *, option: str) -> Any:
    """A JSON flag given as YAML data: the same number bounds as JSON text, and the same fields."""
    stack = [value]
    seen = 0
    while stack:
        v = stack.pop()
        seen += 1
        if isinstance(v, bool) or v is None or isinstance(v, str):
            continue
        if isinstance(v, int) and v.bit_length() > 128:
            raise InputError(f"{option}: a number of {len(str(v)) if v.bit_length() < 4000 else 'thousands of'} digits")
        if isinstance(v, float) and not math.isfinite(v):
            raise InputError(f"{option}: {v!r} is not a finite number")
        if isinstance(v, dict):
            stack.extend(v.values())
            if any(not isinstance(k, str) for k in v):
                raise InputError(f"{option}: keys must be strings")
        elif isinstance(v, list):
            stack.extend(v)
        elif not isinstance(v, (int, float)):
            raise InputError(f"{option}: {type(v).__name__} is not a JSON value")
    if _depth(value) > MAX_DEPTH:
        raise InputError(f"{option}: nested more than {MAX_DEPTH} levels")
    check_fields(dest, value, option=option)
    return value


def _short(text: str) -> str:
    return text if len(text) <= 40 else text[:40] + "…"
