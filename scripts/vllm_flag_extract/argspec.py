"""An argparse stand-in that records ``add_argument`` calls, and the flag records made from them.

:class:`ParserToken` is handed to the interpreted ``add_cli_args`` code in place
of a real parser; it records every ``add_argument`` call. :func:`flag_records`
turns the recorded calls into the table's flag entries, applying argparse's own
rules (dest, defaults, ``BooleanOptionalAction`` negatives) and vLLM's
``EnableDisableAction`` inverses (``--enable-x`` / ``--disable-x``, 0.33+).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from .evaluator import Evaluator
from .kwargs import ArgType, sorted_values
from .source import (
    MISSING,
    ClassRef,
    EnumMember,
    External,
    FieldSpec,
    FuncRef,
    Instance,
    Unknown,
)

_DEPRECATION = re.compile(
    r"(^\W*deprecated\b|\[deprecated\]|\bis deprecated\b|\bhas been deprecated\b|"
    r"\bare deprecated\b|\bwill be removed\b|\bdeprecated and\b|\bdeprecated:)",
    re.IGNORECASE)
_BOOL_ACTIONS = {"BooleanOptionalAction", "EnableDisableAction"}

# ---------------------------------------------------------- argparse stand-in
@dataclass
class RawAction:
    opts: list
    kw: dict
    module: str


@dataclass
class Registry:
    name: str
    actions: list[RawAction] = field(default_factory=list)
    defaults: dict[str, Any] = field(default_factory=dict)


class Session:
    """All parsers created while one entry point runs."""

    def __init__(self) -> None:
        self.registries: list[Registry] = []

    def new(self, name: str) -> Registry:
        reg = Registry(name)
        self.registries.append(reg)
        return reg

    def find(self, name: str) -> Registry | None:
        return next((r for r in self.registries if r.name == name), None)


class ParserToken:
    """Stands in for an ``ArgumentParser`` (or a group of one) in interpreted code."""

    def __init__(self, session: Session, registry: Registry):
        self.session = session
        self.registry = registry

    def call_method(self, ev: Evaluator, name: str, args: list, kwargs: dict) -> Any:
        if name == "add_argument":
            module = ev.module_stack[-1] if ev.module_stack else ""
            self.registry.actions.append(RawAction(list(args), dict(kwargs), module))
            return None
        if name in ("add_argument_group", "add_mutually_exclusive_group"):
            return ParserToken(self.session, self.registry)
        if name == "set_defaults":
            self.registry.defaults.update(kwargs)
            return None
        if name == "add_subparsers":
            return SubparsersToken(self.session)
        return Unknown(f"parser.{name}()")

    def set_attr(self, name: str, value: Any) -> None:
        pass


class SubparsersToken:
    def __init__(self, session: Session):
        self.session = session

    def call_method(self, ev: Evaluator, name: str, args: list, kwargs: dict) -> Any:
        if name == "add_parser":
            label = args[0] if args and isinstance(args[0], str) else "?"
            return ParserToken(self.session, self.session.new(label))
        return Unknown(f"subparsers.{name}()")

    def set_attr(self, name: str, value: Any) -> None:
        pass


# ------------------------------------------------------------- flag records
def to_json(value: Any) -> tuple[Any, str | None]:
    """(JSON-able value, repr) — repr is set when the value could not be represented."""
    if value is None or isinstance(value, (bool, str)):
        return value, None
    if isinstance(value, int):
        return value, None
    if isinstance(value, float):
        if math.isfinite(value):
            return value, None
        return None, repr(value)
    if isinstance(value, EnumMember):
        inner, rep = to_json(value.value)
        return (inner, None) if rep is None else (value.name, None)
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
        if isinstance(value, (set, frozenset)):
            items = sorted_values(items)
        out = []
        for item in items:
            j, rep = to_json(item)
            if rep is not None:
                return None, _repr(value)
            out.append(j)
        return out, None
    if isinstance(value, dict):
        out_d = {}
        for k, v in value.items():
            j, rep = to_json(v)
            if rep is not None or not isinstance(k, str):
                return None, _repr(value)
            out_d[k] = j
        return out_d, None
    return None, _repr(value)


def _repr(value: Any) -> str:
    if value is MISSING:
        return "MISSING"
    if isinstance(value, Unknown):
        return value.text
    if isinstance(value, External):
        return value.qualname
    if isinstance(value, (FuncRef, ClassRef)):
        return value.name
    if isinstance(value, Instance):
        return f"{value.cls.name}()"
    if isinstance(value, FieldSpec):
        return "field(...)"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _value_type(value: Any) -> ArgType:
    if isinstance(value, ArgType):
        return value
    if isinstance(value, External):
        if value.qualname in ("builtins.int", "builtins.float", "builtins.str"):
            return ArgType(value.name)
        if value.qualname == "json.loads":
            return ArgType("json")
        return ArgType("str")
    if isinstance(value, FuncRef):
        name = value.name
        if name == "human_readable_int":
            return ArgType("size")
        if name == "human_readable_int_or_auto":
            return ArgType("size", auto=True)
        if name in ("parse_dataclass",):
            return ArgType("json")
        if name == "check_port":
            return ArgType("int")
        return ArgType("str")
    return ArgType("str")


def _action_kind(ev: Evaluator, action: Any) -> str:
    """store | store_true | store_false | store_const | append | count | bool | storebool | skip | custom"""
    if action is None or action == "store":
        return "store"
    if isinstance(action, str):
        if action in ("store_true", "store_false", "store_const", "append", "count", "append_const", "extend"):
            return action
        if action in ("help", "version"):
            return "skip"
        return "store"
    if isinstance(action, External):
        if action.name in _BOOL_ACTIONS:
            return "bool"
        return "custom"
    if isinstance(action, ClassRef):
        names = ev.external_bases(action) | {action.name}
        if names & _BOOL_ACTIONS:
            return "bool"
        if action.name == "StoreBoolean":
            return "storebool"
        return "custom"
    return "store"


def _dest(opts: list[str], kw: dict) -> str:
    if isinstance(kw.get("dest"), str):
        return kw["dest"]
    longs = [o for o in opts if o.startswith("--")]
    first = longs[0] if longs else opts[0]
    return first.lstrip("-").replace("-", "_")


def _negatives(opts: list[str], enable_disable: bool) -> list[str]:
    neg = ["--no-" + o[2:] for o in opts if o.startswith("--")]
    if enable_disable:
        for o in opts:
            if o.startswith("--enable-"):
                neg.append("--disable-" + o[len("--enable-"):])
            elif o.startswith("--disable-"):
                neg.append("--enable-" + o[len("--disable-"):])
    return neg


def _help_text(text: Any) -> str:
    """Help as one line (only read for deprecation notices; tables do not store help)."""
    return " ".join(text.split()) if isinstance(text, str) else ""


def flag_records(ev: Evaluator, registry: Registry, enable_disable: bool) -> list[dict]:
    """Turn recorded ``add_argument`` calls into table entries (merged by dest)."""
    by_dest: dict[str, dict] = {}
    order: list[str] = []
    for raw in registry.actions:
        opts = [o for o in raw.opts if isinstance(o, str)]
        if not opts or not all(o.startswith("-") for o in opts):
            continue  # positional (model_tag) or unevaluable
        kw = raw.kw
        kind = _action_kind(ev, kw.get("action"))
        if kind == "skip":
            continue
        dest = _dest(opts, kw)
        rec: dict[str, Any] = {"dest": dest, "options": [], "neg": []}
        nargs = kw.get("nargs")
        default_given = "default" in kw
        default = kw.get("default")
        if kind == "store_true":
            rec.update(options=opts, takes_value=False, type="bool")
            default = default if default_given else False
        elif kind == "store_false":
            rec.update(neg=opts, takes_value=False, type="bool")
            default = default if default_given else True
        elif kind in ("store_const", "append_const"):
            rec.update(options=opts, takes_value=False, type="bool", action=kind)
            rec["const"] = to_json(kw.get("const"))[0]
        elif kind == "count":
            rec.update(options=opts, takes_value=False, type="int", action="count")
        elif kind == "bool":
            rec.update(options=opts, neg=_negatives(opts, enable_disable), takes_value=False, type="bool")
        elif kind == "storebool":
            rec.update(options=opts, takes_value=True, type="bool", choices=["false", "true"])
            if nargs == "?" and "const" in kw:  # `--enable-chunked-prefill` alone is const ("True") in 0.6-0.7
                rec["nargs"] = "?"
                rec["const"] = to_json(kw.get("const"))[0]
        else:
            vt = _value_type(kw.get("type"))
            rec.update(options=opts, takes_value=not (isinstance(nargs, int) and nargs == 0), type=vt.tag)
            if vt.auto:
                rec["auto"] = True
            if kind in ("append", "extend"):
                rec["action"] = kind
            if kind == "custom":
                rec["action"] = "custom"
            if nargs in ("+", "*") or (isinstance(nargs, int) and nargs > 1):
                rec["item"] = rec["type"]
                rec["type"] = "list"
            if nargs is not None and not isinstance(nargs, (str, int)):
                nargs = None
            if nargs is not None:
                rec["nargs"] = nargs
            if nargs == "?" and "const" in kw:
                rec["const"] = to_json(kw.get("const"))[0]
            choices = kw.get("choices")
            if choices is not None:
                items = ev.iterate(choices)
                # an empty list comes from a registry filled at import time: not a real restriction
                if items and not any(isinstance(c, Unknown) for c in items):
                    rec["choices"] = [to_json(c)[0] for c in items]
        if dest in registry.defaults:
            default = registry.defaults[dest]
        value, rep = to_json(default)
        rec["default"] = value
        if rep is not None:
            rec["default_repr"] = rep
        help_text = _help_text(kw.get("help"))
        deprecated = bool(kw.get("deprecated") is True or _DEPRECATION.search(help_text[:300]))
        action = kw.get("action")
        if isinstance(action, ClassRef) and "deprecat" in action.name.lower():
            deprecated = True
        rec["deprecated"] = deprecated
        rec["group"] = "engine" if raw.module.startswith("vllm.engine") else "frontend"
        if dest not in by_dest:
            by_dest[dest] = rec
            order.append(dest)
            if deprecated:
                rec["deprecated_options"] = list(rec["options"]) + list(rec["neg"])
            continue
        _merge(by_dest[dest], rec)
    return [by_dest[d] for d in order]


def _merge(into: dict, other: dict) -> None:
    """A second ``add_argument`` with the same dest: its options become aliases."""
    for key in ("options", "neg"):
        for opt in other[key]:
            if opt not in into[key]:
                into[key].append(opt)
    if other["deprecated"]:
        dep = into.setdefault("deprecated_options", [])
        dep.extend(o for o in other["options"] + other["neg"] if o not in dep)
    if into["deprecated"] and not other["deprecated"]:
        # the flag lives on under the new spelling; only the old options are deprecated
        into["deprecated"] = False
        into["default"] = other["default"]
    if into.get("type") == "bool" and other.get("type") != "bool":
        into.update({k: other[k] for k in ("type", "takes_value") if k in other})
