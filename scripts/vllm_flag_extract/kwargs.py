"""What vLLM's ``get_kwargs(XConfig)`` derives from a config dataclass field.

vLLM builds most CLI arguments from its config dataclasses: the field name
gives ``--field-name``, the annotation gives the type (``bool`` -> ``--x/--no-x``,
``Literal`` -> choices unless ``str`` is also allowed, ``list``/``tuple`` ->
``nargs``, a nested dataclass or ``dict`` -> JSON, listed integer fields ->
human-readable sizes), and the default comes from the field. This module
re-derives those kwargs from the evaluated annotations.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from .evaluator import Evaluator
from .source import ClassRef, External, TypeForm


@dataclass
class ArgType:
    """The value type a flag takes, as the table records it."""

    tag: str                 # int | float | str | json | size
    auto: bool = False       # size that also accepts "auto" / -1


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
        return ArgType(_py_tag(values[0]) if values else "str"), sorted_values(values)
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


def sorted_values(values: Any) -> list:
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
                kw["choices"] = sorted_values(values)
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
