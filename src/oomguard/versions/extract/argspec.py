"""vLLM's ``get_kwargs`` rules and an argparse stand-in that records ``add_argument``.

``compute_kwargs`` mirrors what vLLM's ``get_kwargs(XConfig)`` derives from a
config dataclass (type, choices, ``--x/--no-x`` for bools, lists, JSON for
nested configs, human-readable sizes). :class:`ParserToken` is handed to the
interpreted ``add_cli_args`` code in place of a real parser; it records every
``add_argument`` call. :func:`flag_records` then turns the recorded calls into
the table's flag entries, applying argparse's own rules (dest, defaults,
``BooleanOptionalAction`` negatives, vLLM's ``EnableDisableAction`` inverses).
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field
from typing import Any

from .evaluator import Evaluator
from .source import (
    MISSING,
    ClassRef,
    EnumMember,
    External,
    FieldSpec,
    FuncRef,
    Instance,
    TypeForm,
    Unknown,
)

_DEPRECATION = re.compile(
    r"(^\W*deprecated\b|\[deprecated\]|\bis deprecated\b|\bhas been deprecated\b|"
    r"\bare deprecated\b|\bwill be removed\b|\bdeprecated and\b|\bdeprecated:)",
    re.IGNORECASE)
_BOOL_ACTIONS = {"BooleanOptionalAction", "EnableDisableAction"}


@dataclass
class ArgType:
    """The value type a flag takes, as the table records it."""

    tag: str                 # int | float | str | json | size
    auto: bool = False       # size that also accepts "auto" / -1


# ----------------------------------------------------------------- type hints
def flatten_hints(ev: Evaluator, value: Any) -> list[tuple]:
    """Flatten an evaluated annotation into atoms like vLLM's ``get_type_hints``."""
    if value is None:
        return [("none",)]
    if isinstance(value, TypeForm):
        if value.kind == "union":
            out: list[tuple] = []
            for a in value.args:
                out.extend(flatten_hints(ev, a))
            return out
        if value.kind == "literal":
            return [("literal", tuple(value.args))]
        if value.origin in ("list", "tuple", "set", "frozenset", "dict"):
            origin = "set" if value.origin == "frozenset" else value.origin
            return [(origin, tuple(value.args))]
        return [("class", value.origin)]
    if isinstance(value, External):
        mod, _, name = value.qualname.rpartition(".")
        if mod == "builtins" and name in ("int", "float", "str", "bool", "dict", "list", "tuple", "set", "bytes"):
            return [(name if name != "bytes" else "str", ())]
        if mod == "builtins" and name == "frozenset":
            return [("set", ())]
        return [("class", value.qualname)]
    if isinstance(value, ClassRef):
        if ev.is_dataclass(value):
            return [("dataclass", value)]
        if ev.is_dict_subclass(value):
            return [("dict", ())]
        return [("class", value.name)]
    if isinstance(value, str):  # unresolved forward reference
        return [("class", value)]
    return [("class", getattr(value, "text", repr(value)))]


def _kinds(atoms: list[tuple]) -> set[str]:
    return {a[0] for a in atoms}


def _atom(atoms: list[tuple], kind: str) -> tuple | None:
    return next((a for a in atoms if a[0] == kind), None)


def _elem_type(ev: Evaluator, args: tuple) -> tuple[Any, list | None]:
    """Element ArgType / choices for ``list[X]`` / ``tuple[X, ...]``."""
    elems = [a for a in args if not (isinstance(a, External) and a.name == "Ellipsis") and a is not Ellipsis]
    if not elems:
        return ArgType("str"), None
    atoms = flatten_hints(ev, elems[0])
    kinds = _kinds(atoms)
    if "literal" in kinds:
        values = _atom(atoms, "literal")[1]
        if "str" in kinds:
            return ArgType("str"), None
        return ArgType(_py_tag(values[0]) if values else "str"), _sorted(values)
    if len(kinds - {"none"}) > 1:
        return ArgType("str"), None
    for kind in ("int", "float", "str"):
        if kind in kinds:
            return ArgType(kind), None
    if "dataclass" in kinds or "dict" in kinds:
        return ArgType("json"), None
    return ArgType("str"), None


def _py_tag(value: Any) -> str:
    if isinstance(value, bool):
        return "str"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return "str"


def _sorted(values: Any) -> list:
    values = list(values)
    try:
        return sorted(values)
    except TypeError:
        return values


def attr_docs(cls: ClassRef, ev: Evaluator) -> dict[str, str]:
    """Attribute docstrings (the string literal after a field), like vLLM's get_attr_docs."""
    docs: dict[str, str] = {}
    for c in reversed(ev.mro(cls)):
        body = c.node.body
        for stmt, nxt in zip(body, body[1:]):
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                    and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) \
                    and isinstance(nxt.value.value, str):
                docs[stmt.target.id] = nxt.value.value
    return docs


def compute_kwargs(ev: Evaluator, cls: Any, size_fields: dict[str, bool]) -> dict[str, dict]:
    """argparse kwargs per field of a config dataclass (vLLM's ``get_kwargs``).

    ``size_fields`` maps field names that vLLM parses with ``human_readable_int``
    to whether they also accept ``auto`` (``human_readable_int_or_auto``).
    """
    if not isinstance(cls, ClassRef):
        return {}
    docs = attr_docs(cls, ev)
    kwargs: dict[str, dict] = {}
    for f in ev.dataclass_fields(cls):
        atoms = flatten_hints(ev, ev.eval_annotation(f.annotation, f.module))
        atoms = [a for a in atoms]
        kinds = _kinds(atoms)
        default = ev.field_default(f)
        kw: dict[str, Any] = {"default": default, "help": docs.get(f.name, "")}
        if "dataclass" in kinds:
            kw["type"] = ArgType("json")
        elif kinds == {"bool", "str", "none"}:
            kw["type"] = ArgType("str")
            kw["nargs"] = "?"
            kw["const"] = True
        elif "bool" in kinds:
            kw["action"] = External("argparse.BooleanOptionalAction")
        elif "literal" in kinds:
            values = _atom(atoms, "literal")[1]
            kw["type"] = ArgType(_py_tag(values[0]) if values else "str")
            if "str" not in kinds:
                kw["choices"] = _sorted(values)
        elif kinds & {"tuple", "list", "set"}:
            kind = next(k for k in ("tuple", "list", "set") if k in kinds)
            args = _atom(atoms, kind)[1]
            item, choices = _elem_type(ev, args)
            kw["type"] = item
            if choices is not None:
                kw["choices"] = choices
            fixed = kind == "tuple" and args and not any(
                isinstance(a, External) and a.name == "Ellipsis" or a is Ellipsis for a in args)
            kw["nargs"] = len(args) if fixed else "+"
        elif "int" in kinds:
            if f.name in size_fields:
                kw["type"] = ArgType("size", auto=size_fields[f.name])
            else:
                kw["type"] = ArgType("int")
        elif "float" in kinds:
            kw["type"] = ArgType("float")
        elif "dict" in kinds and ("str" in kinds or "class" in kinds):
            kw["type"] = ArgType("str")   # vLLM's union_dict_and_str: JSON or a plain string
        elif "dict" in kinds:
            kw["type"] = ArgType("json")
        else:
            kw["type"] = ArgType("str")
        if "none" in kinds and "bool" not in kinds and kw.get("choices"):
            kw["choices"].append(None)
        kwargs[f.name] = kw
    return kwargs


def size_fields_of(ev: Evaluator, module_name: str) -> dict[str, bool]:
    """Fields vLLM's get_kwargs parses as human-readable ints, read from its source.

    Finds the ``if``/``elif`` branches of ``get_kwargs``/``_compute_kwargs`` whose
    body names ``human_readable_int[_or_auto]`` and collects the field names in
    their tests (directly or through a local set/list literal).
    """
    mod = ev.module(module_name)
    out: dict[str, bool] = {}
    if mod is None:
        return out
    for kind, node in [d for defs in mod.defs.values() for d in defs]:
        if kind != "func" or node.name not in ("get_kwargs", "_compute_kwargs"):
            continue
        local_sets: dict[str, list[str]] = {}
        for sub in ast.walk(node):
            if isinstance(sub, ast.Assign) and isinstance(sub.value, (ast.Set, ast.List, ast.Tuple)):
                names = [e.value for e in sub.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                for t in sub.targets:
                    if isinstance(t, ast.Name):
                        local_sets[t.id] = names
        for sub in ast.walk(node):
            if not isinstance(sub, ast.If):
                continue
            body_names = {n.id for stmt in sub.body for n in ast.walk(stmt) if isinstance(n, ast.Name)}
            auto = "human_readable_int_or_auto" in body_names
            if not auto and "human_readable_int" not in body_names:
                continue
            for n in ast.walk(sub.test):
                if isinstance(n, ast.Constant) and isinstance(n.value, str):
                    out[n.value] = auto
                elif isinstance(n, ast.Name) and n.id in local_sets:
                    for name in local_sets[n.id]:
                        out.setdefault(name, auto)
    return out


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
            items = _sorted(items)
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


def _first_sentence(text: Any) -> str:
    if not isinstance(text, str):
        return ""
    text = " ".join(text.split())
    return text


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
                if items is not None and not any(isinstance(c, Unknown) for c in items):
                    rec["choices"] = [to_json(c)[0] for c in items]
        if dest in registry.defaults:
            default = registry.defaults[dest]
        value, rep = to_json(default)
        rec["default"] = value
        if rep is not None:
            rec["default_repr"] = rep
        help_text = _first_sentence(kw.get("help"))
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
