"""Shared pieces of the symbolic evaluator: frames, control-flow signals, operator
tables and small predicates on evaluated values."""

from __future__ import annotations

import ast
import operator
from typing import Any, Callable

from .source import MISSING, ClassRef, EnumMember, External, FieldSpec, FuncRef, Module, ModuleRef, TypeForm, Unknown

TYPING_MODULES = {"typing", "typing_extensions"}
GENERIC_ALIASES = {
    "List": "list", "Dict": "dict", "Tuple": "tuple", "Set": "set",
    "FrozenSet": "frozenset", "Type": "type", "DefaultDict": "dict",
    "list": "list", "dict": "dict", "tuple": "tuple", "set": "set",
    "frozenset": "frozenset", "type": "type",
}
PLAIN = (bool, int, float, str, bytes, type(None), list, dict, tuple, set, frozenset)
METHOD_ALLOW = {
    str: {"replace", "lower", "upper", "strip", "lstrip", "rstrip", "split", "rsplit",
          "join", "startswith", "endswith", "format", "removeprefix", "removesuffix",
          "title", "capitalize", "partition", "rpartition", "isdigit", "splitlines"},
    dict: {"items", "keys", "values", "get", "pop", "update", "setdefault", "copy"},
    list: {"append", "extend", "remove", "insert", "pop", "copy", "index", "sort", "count"},
    set: {"add", "discard", "remove", "update", "union", "copy", "intersection", "difference"},
    frozenset: {"union", "intersection", "difference"},
    tuple: {"index", "count"},
}
BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.BitOr: operator.or_, ast.BitAnd: operator.and_,
    ast.LShift: operator.lshift, ast.RShift: operator.rshift,
}
CMPOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
ANNOTATING = {"Annotated", "SkipValidation", "Final", "Required", "NotRequired", "ReadOnly"}
ENUM_BASES = {"Enum", "IntEnum", "StrEnum", "Flag", "IntFlag"}
IN_PROGRESS = object()


class ReturnSignal(Exception):
    def __init__(self, value: Any):
        self.value = value


class BreakSignal(Exception):
    pass


class ContinueSignal(Exception):
    pass


class AbortSignal(Exception):
    """A ``raise`` on a path we know is taken: the function produces no value."""


class BudgetExceeded(Exception):
    pass


class Frame:
    __slots__ = ("module", "locals", "closure", "owner", "bound", "speculative")

    def __init__(self, module: Module, locals_: dict | None = None, closure: dict | None = None,
                 owner: ClassRef | None = None, bound: Any = None):
        self.module = module
        self.locals = {} if locals_ is None else locals_
        self.closure = closure
        self.owner = owner
        self.bound = bound
        self.speculative = 0


class BoundMethod:
    """A method of a plain value (``"a_b".replace``) or of a host object."""

    __slots__ = ("obj", "name")

    def __init__(self, obj: Any, name: str):
        self.obj = obj
        self.name = name


def is_known(value: Any) -> bool:
    """True when Python truthiness of ``value`` is meaningful."""
    return isinstance(value, PLAIN) or isinstance(
        value, (ClassRef, FuncRef, EnumMember, ModuleRef, FieldSpec))


class DictView:
    """``d.items()`` / ``d.keys()``: a snapshot list the interpreter can iterate."""

    __slots__ = ("items",)

    def __init__(self, items: list):
        self.items = items


def is_weak(value: Any) -> bool:
    return isinstance(value, Unknown) or (
        isinstance(value, External) and value.qualname in ("typing.Any", "builtins.object"))


def is_typish(value: Any) -> bool:
    return value is None or isinstance(value, (TypeForm, ClassRef)) or (
        isinstance(value, External))


def identity_known(value: Any) -> bool:
    return value is None or value is MISSING or isinstance(value, (bool, EnumMember))


def has_unknown(value: Any) -> bool:
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(isinstance(v, Unknown) for v in value)
    return False


def is_classvar(annotation: ast.expr) -> bool:
    text = src_text(annotation)
    return text.startswith(("ClassVar", "typing.ClassVar", "InitVar", "dataclasses.InitVar")) or \
        text.strip("'\"").startswith("ClassVar")


def merged_scope(frame: Frame) -> dict:
    scope = dict(frame.closure or {})
    scope.update(frame.locals)
    return scope


def src_text(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except Exception:
        return type(node).__name__
    return text if len(text) <= 80 else text[:77] + "..."

