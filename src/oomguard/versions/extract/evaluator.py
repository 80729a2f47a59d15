"""A small, side-effect-free interpreter for the Python that builds vLLM's CLI.

It evaluates expressions and runs function bodies over a :class:`SourceTree`
without importing anything from it. Values are plain Python values where they
can be computed, and the reference types of :mod:`.source` otherwise
(:class:`ClassRef`, :class:`FuncRef`, :class:`External`, :class:`Unknown` ...).

Design choices that keep it safe and robust on code it was not written for:
- nothing outside the tree is imported or executed; names from other packages
  are :class:`External` tokens, and only a fixed allow-list of pure operations
  on plain values is performed;
- a condition that cannot be decided runs *both* branches ("speculatively"; a
  ``raise`` there is ignored), so registration code guarded by run-time checks
  such as ``"serve" in sys.argv`` is still seen;
- every statement is isolated: an error in one is recorded and skipped;
- a step budget and a call-depth limit bound the work.
"""

from __future__ import annotations

import ast
import builtins
import copy
import operator
from typing import Any, Callable

from .source import (
    MISSING,
    ClassRef,
    DataclassField,
    EnumMember,
    External,
    FieldSpec,
    FuncRef,
    Instance,
    Module,
    ModuleRef,
    SourceTree,
    SuperRef,
    TypeForm,
    Unknown,
)

_TYPING_MODULES = {"typing", "typing_extensions"}
_GENERIC_ALIASES = {
    "List": "list", "Dict": "dict", "Tuple": "tuple", "Set": "set",
    "FrozenSet": "frozenset", "Type": "type", "DefaultDict": "dict",
    "list": "list", "dict": "dict", "tuple": "tuple", "set": "set",
    "frozenset": "frozenset", "type": "type",
}
_PLAIN = (bool, int, float, str, bytes, type(None), list, dict, tuple, set, frozenset)
_METHOD_ALLOW = {
    str: {"replace", "lower", "upper", "strip", "lstrip", "rstrip", "split", "rsplit",
          "join", "startswith", "endswith", "format", "removeprefix", "removesuffix",
          "title", "capitalize", "partition", "rpartition", "isdigit", "splitlines"},
    dict: {"items", "keys", "values", "get", "pop", "update", "setdefault", "copy"},
    list: {"append", "extend", "remove", "insert", "pop", "copy", "index", "sort", "count"},
    set: {"add", "discard", "remove", "update", "union", "copy", "intersection", "difference"},
    frozenset: {"union", "intersection", "difference"},
    tuple: {"index", "count"},
}
_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.BitOr: operator.or_, ast.BitAnd: operator.and_,
    ast.LShift: operator.lshift, ast.RShift: operator.rshift,
}
_CMPOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
_ENUM_BASES = {"Enum", "IntEnum", "StrEnum", "Flag", "IntFlag"}
_IN_PROGRESS = object()


class _Return(Exception):
    def __init__(self, value: Any):
        self.value = value


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _Abort(Exception):
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


Hook = Callable[["Evaluator", list, dict], Any]


def is_known(value: Any) -> bool:
    """True when Python truthiness of ``value`` is meaningful."""
    return isinstance(value, _PLAIN) or isinstance(
        value, (ClassRef, FuncRef, EnumMember, ModuleRef, FieldSpec))


class Evaluator:
    """Evaluates code of one :class:`SourceTree`.

    ``hooks`` intercept calls by name: keys are vllm function names (``get_kwargs``)
    or external dotted names (``dataclasses.field``).
    """

    def __init__(self, tree: SourceTree, hooks: dict[str, Hook] | None = None,
                 budget: int = 3_000_000, max_depth: int = 24):
        self.tree = tree
        self.hooks: dict[str, Hook] = dict(hooks or {})
        self.budget = budget
        self.max_depth = max_depth
        self.steps = 0
        self.depth = 0
        self.errors: list[str] = []
        # values for external names (``os.environ`` -> {} : the empty environment)
        self.externals: dict[str, Any] = {}
        self.module_stack: list[str] = []  # modules of the functions being run

    # ------------------------------------------------------------------ names
    def module(self, name: str) -> Module | None:
        return self.tree.module(name)

    def global_value(self, module: Module, name: str) -> Any:
        cached = module.values.get(name, MISSING)
        if cached is _IN_PROGRESS:
            return Unknown(f"{module.name}.{name} (cycle)")
        if cached is not MISSING:
            return cached
        candidates = module.defs.get(name)
        if not candidates:
            return MISSING
        module.values[name] = _IN_PROGRESS
        chosen: Any = Unknown(f"{module.name}.{name}")
        for kind, payload in candidates:
            value = self._definition(module, kind, payload)
            chosen = value
            if not _weak(value):
                break
        module.values[name] = chosen
        return chosen

    def _definition(self, module: Module, kind: str, payload: Any) -> Any:
        if kind == "class":
            return ClassRef(module, payload)
        if kind == "func":
            return FuncRef(module, payload)
        if kind == "module":
            return self.import_module(payload)
        if kind == "from":
            base, name = payload
            return self.import_from(base, name)
        return self.eval(payload, Frame(module))

    def import_module(self, dotted: str) -> Any:
        if dotted.split(".")[0] == self.tree.package:
            return ModuleRef(dotted) if self.tree.has_module(dotted) else Unknown(dotted)
        return External(dotted)

    def import_from(self, base: str, name: str) -> Any:
        if base.split(".")[0] != self.tree.package:
            if base in _TYPING_MODULES or base == "collections.abc":
                return External(f"typing.{name}") if base in _TYPING_MODULES else External(f"{base}.{name}")
            return self.externals.get(f"{base}.{name}", External(f"{base}.{name}"))
        mod = self.module(base)
        if mod is not None and name in mod.defs:
            return self.global_value(mod, name)
        sub = f"{base}.{name}"
        if self.tree.has_module(sub):
            return ModuleRef(sub)
        return Unknown(sub)

    def lookup(self, name: str, frame: Frame) -> Any:
        if name in frame.locals:
            return frame.locals[name]
        if frame.closure is not None and name in frame.closure:
            return frame.closure[name]
        value = self.global_value(frame.module, name)
        if value is not MISSING:
            return value
        if hasattr(builtins, name):
            return External(f"builtins.{name}")
        return Unknown(name)

    # ---------------------------------------------------------------- classes
    def mro(self, cls: ClassRef) -> list[ClassRef]:
        cached = cls._cache.get("mro")
        if cached is not None:
            return cached
        cls._cache["mro"] = [cls]  # guards against cycles while computing
        order = [cls]
        for base in self.bases(cls):
            if isinstance(base, ClassRef):
                for c in self.mro(base):
                    if c not in order:
                        order.append(c)
        cls._cache["mro"] = order
        return order

    def bases(self, cls: ClassRef) -> list[Any]:
        cached = cls._cache.get("bases")
        if cached is None:
            cached = []
            for node in cls.node.bases:
                value = self.eval(node, Frame(cls.module))
                if isinstance(value, TypeForm) and value.kind == "generic":
                    origin = value.origin
                    value = External(origin if "." in origin else f"builtins.{origin}")
                cached.append(value)
            cls._cache["bases"] = cached
        return cached

    def external_bases(self, cls: ClassRef) -> set[str]:
        names = set()
        for c in self.mro(cls):
            for b in self.bases(c):
                if isinstance(b, External):
                    names.add(b.name)
                elif isinstance(b, ClassRef):
                    names.add(b.name)
        return names

    def is_enum(self, cls: ClassRef) -> bool:
        return bool(self.external_bases(cls) & _ENUM_BASES)

    def is_dataclass(self, cls: ClassRef) -> bool:
        for c in self.mro(cls):
            if {"dataclass", "config"} & set(c.decorator_names()):
                return True
        return False

    def is_dict_subclass(self, cls: ClassRef) -> bool:
        names = self.external_bases(cls)
        return "dict" in names and "TypedDict" not in names

    def enum_members(self, cls: ClassRef) -> list[EnumMember]:
        cached = cls._cache.get("members")
        if cached is not None:
            return cached
        members = []
        for i, stmt in enumerate(cls.node.body):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                name = stmt.targets[0].id
                if name.startswith("_"):
                    continue
                value = self.eval(stmt.value, Frame(cls.module))
                if isinstance(value, Unknown):  # enum.auto(): str enums use the lower-cased name
                    value = name.lower() if "str" in self.external_bases(cls) or "StrEnum" in self.external_bases(cls) else i + 1
                members.append(EnumMember(cls, name, value))
        cls._cache["members"] = members
        return members

    def dataclass_fields(self, cls: ClassRef) -> list[DataclassField]:
        cached = cls._cache.get("fields")
        if cached is not None:
            return cached
        fields: dict[str, DataclassField] = {}
        for c in reversed(self.mro(cls)):
            for stmt in c.node.body:
                if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                    continue
                if _is_classvar(stmt.annotation):
                    continue
                default: Any = MISSING
                if stmt.value is not None:
                    default = self.eval(stmt.value, Frame(c.module))
                fields[stmt.target.id] = DataclassField(
                    stmt.target.id, stmt.annotation, c.module, default, stmt.value)
        result = list(fields.values())
        cls._cache["fields"] = result
        return result

    def field_default(self, f: DataclassField) -> Any:
        """The value a dataclass field defaults to (factories are called)."""
        default = f.default
        if isinstance(default, FieldSpec):
            if default.default is not MISSING:
                return default.default
            if default.default_factory is not MISSING:
                return self.call(default.default_factory, [], {})
            return MISSING
        return default

    def class_attr(self, cls: ClassRef, name: str, bind: Any = None) -> Any:
        if name == "__name__":
            return cls.name
        if name == "__doc__":
            return ast.get_docstring(cls.node)
        if self.is_enum(cls):
            for m in self.enum_members(cls):
                if m.name == name:
                    return m
        for c in self.mro(cls):
            for stmt in c.node.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
                    decos = {d.id for d in stmt.decorator_list if isinstance(d, ast.Name)}
                    if "staticmethod" in decos:
                        return FuncRef(c.module, stmt, None, c)
                    if "property" in decos:
                        return Unknown(f"{cls.name}.{name}")
                    if "classmethod" in decos:
                        return FuncRef(c.module, stmt, bind if bind is not None else cls, c)
                    return FuncRef(c.module, stmt, bind, c)
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                        and stmt.target.id == name:
                    if stmt.value is None:
                        return Unknown(f"{cls.name}.{name} (no default)")
                    value = self.eval(stmt.value, Frame(c.module))
                    if isinstance(value, FieldSpec):
                        if value.default is not MISSING:
                            return value.default
                        return Unknown(f"{cls.name}.{name} (factory)")
                    return value
                if isinstance(stmt, ast.Assign):
                    for t in stmt.targets:
                        if isinstance(t, ast.Name) and t.id == name:
                            return self.eval(stmt.value, Frame(c.module))
        return Unknown(f"{cls.name}.{name}")

    # ------------------------------------------------------------ expressions
    def tick(self) -> None:
        self.steps += 1
        if self.steps > self.budget:
            raise BudgetExceeded()

    def eval(self, node: ast.AST, frame: Frame) -> Any:
        self.tick()
        method = getattr(self, "_e_" + type(node).__name__, None)
        if method is None:
            return Unknown(_src(node))
        return method(node, frame)

    def _e_Constant(self, node: ast.Constant, frame: Frame) -> Any:
        return node.value

    def _e_Name(self, node: ast.Name, frame: Frame) -> Any:
        return self.lookup(node.id, frame)

    def _e_Attribute(self, node: ast.Attribute, frame: Frame) -> Any:
        return self.getattr(self.eval(node.value, frame), node.attr)

    def getattr(self, obj: Any, name: str) -> Any:
        if isinstance(obj, ModuleRef):
            mod = self.module(obj.name)
            if mod is not None and name in mod.defs:
                return self.global_value(mod, name)
            sub = f"{obj.name}.{name}"
            return ModuleRef(sub) if self.tree.has_module(sub) else Unknown(sub)
        if isinstance(obj, External):
            qualname = f"{obj.qualname}.{name}"
            return self.externals.get(qualname, External(qualname))
        if isinstance(obj, ClassRef):
            return self.class_attr(obj, name)
        if isinstance(obj, SuperRef):
            chain = self.mro(obj.obj if isinstance(obj.obj, ClassRef) else obj.owner)
            try:
                start = chain.index(obj.owner) + 1
            except ValueError:
                start = 1
            for c in chain[start:]:
                value = self.class_attr(c, name, bind=obj.obj)
                if not isinstance(value, Unknown):
                    return value
            return Unknown(f"super().{name}")
        if isinstance(obj, EnumMember):
            if name == "value":
                return obj.value
            if name == "name":
                return obj.name
            return Unknown(f"{obj!r}.{name}")
        if isinstance(obj, FieldSpec):
            return {"default": obj.default, "default_factory": obj.default_factory}.get(name, Unknown(name))
        if isinstance(obj, DataclassField):
            if name == "name":
                return obj.name
            if name == "default":
                return obj.default.default if isinstance(obj.default, FieldSpec) else obj.default
            if name == "default_factory":
                return obj.default.default_factory if isinstance(obj.default, FieldSpec) else MISSING
            return Unknown(f"field.{name}")
        if isinstance(obj, Instance):
            return self.class_attr(obj.cls, name, bind=obj)
        if hasattr(obj, "call_method"):  # host objects (argparse tokens)
            return BoundMethod(obj, name)
        allowed = _METHOD_ALLOW.get(type(obj))
        if allowed and name in allowed:
            return BoundMethod(obj, name)
        return Unknown(f"<{type(obj).__name__}>.{name}")

    def _e_Subscript(self, node: ast.Subscript, frame: Frame) -> Any:
        base = self.eval(node.value, frame)
        index = self.eval(node.slice, frame)
        return self.subscript(base, index)

    def subscript(self, base: Any, index: Any) -> Any:
        if isinstance(base, External):
            mod, _, name = base.qualname.rpartition(".")
            args = index if isinstance(index, tuple) else (index,)
            if mod in _TYPING_MODULES or mod == "builtins" or mod == "collections.abc":
                if name == "Literal":
                    flat = []
                    for a in args:
                        flat.extend(a.args if isinstance(a, TypeForm) and a.kind == "literal" else [a])
                    return TypeForm("literal", tuple(flat))
                if name == "Optional":
                    return TypeForm("union", (args[0], None))
                if name == "Union":
                    return TypeForm("union", tuple(args))
                if name in ("Annotated", "Final", "Required", "NotRequired", "ReadOnly"):
                    return args[0]
                if name in _GENERIC_ALIASES:
                    return TypeForm("generic", tuple(args), _GENERIC_ALIASES[name])
            return TypeForm("generic", tuple(args), base.qualname)
        if isinstance(base, ClassRef):
            return base  # Generic[...] subclasses
        if isinstance(base, (dict, list, tuple, str)):
            try:
                return base[index]
            except Exception:
                return Unknown("subscript")
        return Unknown("subscript")

    def _e_Slice(self, node: ast.Slice, frame: Frame) -> Any:
        parts = [None if p is None else self.eval(p, frame) for p in (node.lower, node.upper, node.step)]
        if any(isinstance(p, Unknown) for p in parts):
            return Unknown("slice")
        return slice(*parts)

    def _e_Tuple(self, node: ast.Tuple, frame: Frame) -> Any:
        return tuple(self._elements(node.elts, frame))

    def _e_List(self, node: ast.List, frame: Frame) -> Any:
        return list(self._elements(node.elts, frame))

    def _e_Set(self, node: ast.Set, frame: Frame) -> Any:
        items = self._elements(node.elts, frame)
        try:
            return set(items)
        except TypeError:
            return Unknown("set")

    def _elements(self, elts: list[ast.expr], frame: Frame) -> list:
        out: list = []
        for e in elts:
            if isinstance(e, ast.Starred):
                v = self.eval(e.value, frame)
                it = self.iterate(v)
                if it is None:
                    out.append(Unknown(_src(e)))
                else:
                    out.extend(it)
            else:
                out.append(self.eval(e, frame))
        return out

    def _e_Dict(self, node: ast.Dict, frame: Frame) -> Any:
        out: dict = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                merged = self.eval(v, frame)
                if isinstance(merged, dict):
                    out.update(merged)
                continue
            key = self.eval(k, frame)
            try:
                out[key] = self.eval(v, frame)
            except TypeError:
                continue
        return out

    def _e_JoinedStr(self, node: ast.JoinedStr, frame: Frame) -> Any:
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                value = self.eval(v.value, frame)
                if not isinstance(value, (str, int, float, bool, type(None))):
                    return Unknown(_src(node))
                parts.append(str(value))
        return "".join(parts)

    def _e_BinOp(self, node: ast.BinOp, frame: Frame) -> Any:
        left = self.eval(node.left, frame)
        right = self.eval(node.right, frame)
        if isinstance(node.op, ast.BitOr) and (_typish(left) or _typish(right)):
            return TypeForm("union", (left, right))
        if isinstance(left, _PLAIN) and isinstance(right, _PLAIN):
            try:
                return _BINOPS[type(node.op)](left, right)
            except Exception:
                return Unknown(_src(node))
        return Unknown(_src(node))

    def _e_UnaryOp(self, node: ast.UnaryOp, frame: Frame) -> Any:
        operand = self.eval(node.operand, frame)
        if isinstance(node.op, ast.Not):
            return (not operand) if is_known(operand) else Unknown(_src(node))
        if isinstance(operand, (int, float)) and not isinstance(operand, bool) or isinstance(operand, bool):
            return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}[type(node.op)](operand)
        return Unknown(_src(node))

    def _e_BoolOp(self, node: ast.BoolOp, frame: Frame) -> Any:
        is_and = isinstance(node.op, ast.And)
        value: Any = None
        for v in node.values:
            value = self.eval(v, frame)
            if not is_known(value):
                return Unknown(_src(node))
            if is_and and not value:
                return value
            if not is_and and value:
                return value
        return value

    def _e_Compare(self, node: ast.Compare, frame: Frame) -> Any:
        left = self.eval(node.left, frame)
        for op, comp in zip(node.ops, node.comparators):
            right = self.eval(comp, frame)
            if isinstance(op, (ast.Is, ast.IsNot)):
                if isinstance(left, ClassRef) and isinstance(right, ClassRef):
                    result = (left == right) == isinstance(op, ast.Is)
                elif _identity_known(left) and _identity_known(right):
                    result = _CMPOPS[type(op)](left, right)
                else:
                    return Unknown(_src(node))
            elif isinstance(left, _PLAIN) and isinstance(right, _PLAIN) and not _has_unknown(right):
                try:
                    result = _CMPOPS[type(op)](left, right)
                except Exception:
                    return Unknown(_src(node))
            else:
                return Unknown(_src(node))
            if not result:
                return False
            left = right
        return True

    def _e_IfExp(self, node: ast.IfExp, frame: Frame) -> Any:
        test = self.eval(node.test, frame)
        if not is_known(test):
            return Unknown(_src(node))
        return self.eval(node.body if test else node.orelse, frame)

    def _e_Lambda(self, node: ast.Lambda, frame: Frame) -> Any:
        return FuncRef(frame.module, node, closure=_merged_scope(frame))

    def _e_NamedExpr(self, node: ast.NamedExpr, frame: Frame) -> Any:
        value = self.eval(node.value, frame)
        frame.locals[node.target.id] = value
        return value

    def _comprehension(self, generators: list[ast.comprehension], frame: Frame, emit: Callable[[Frame], None]) -> bool:
        inner = Frame(frame.module, dict(frame.locals), frame.closure, frame.owner, frame.bound)

        def run(i: int) -> bool:
            if i == len(generators):
                emit(inner)
                return True
            gen = generators[i]
            items = self.iterate(self.eval(gen.iter, inner))
            if items is None:
                return False
            for item in items:
                self.assign(gen.target, item, inner)
                ok = True
                for cond in gen.ifs:
                    c = self.eval(cond, inner)
                    if not is_known(c):
                        return False
                    if not c:
                        ok = False
                        break
                if ok and not run(i + 1):
                    return False
            return True

        return run(0)

    def _e_ListComp(self, node: ast.ListComp, frame: Frame) -> Any:
        out: list = []
        ok = self._comprehension(node.generators, frame, lambda f: out.append(self.eval(node.elt, f)))
        return out if ok else Unknown(_src(node))

    _e_GeneratorExp = _e_ListComp

    def _e_SetComp(self, node: ast.SetComp, frame: Frame) -> Any:
        out = self._e_ListComp(node, frame)  # type: ignore[arg-type]
        try:
            return set(out) if isinstance(out, list) else out
        except TypeError:
            return Unknown(_src(node))

    def _e_DictComp(self, node: ast.DictComp, frame: Frame) -> Any:
        out: dict = {}

        def emit(f: Frame) -> None:
            key = self.eval(node.key, f)
            try:
                out[key] = self.eval(node.value, f)
            except TypeError:
                pass

        ok = self._comprehension(node.generators, frame, emit)
        return out if ok else Unknown(_src(node))

    def _e_Starred(self, node: ast.Starred, frame: Frame) -> Any:
        return Unknown(_src(node))

    def iterate(self, value: Any) -> list | None:
        if isinstance(value, dict):
            return list(value.keys())
        if isinstance(value, (list, tuple, set, frozenset, str, range)):
            try:
                return sorted(value) if isinstance(value, (set, frozenset)) else list(value)
            except TypeError:
                return list(value)
        if isinstance(value, ClassRef) and self.is_enum(value):
            return list(self.enum_members(value))
        if isinstance(value, TypeForm) and value.kind == "literal":
            return list(value.args)
        if isinstance(value, _DictView):
            return list(value.items)
        return None

    # ------------------------------------------------------------------ calls
    def _e_Call(self, node: ast.Call, frame: Frame) -> Any:
        func = self.eval(node.func, frame)
        args = self._elements(node.args, frame)
        kwargs: dict[str, Any] = {}
        for kw in node.keywords:
            value = self.eval(kw.value, frame)
            if kw.arg is None:
                if isinstance(value, dict):
                    kwargs.update({k: v for k, v in value.items() if isinstance(k, str)})
                else:
                    kwargs["**"] = value
            else:
                kwargs[kw.arg] = value
        if isinstance(node.func, ast.Name) and node.func.id == "super" and not args:
            if frame.owner is not None:
                return SuperRef(frame.owner, frame.bound)
            return Unknown("super()")
        return self.call(func, args, kwargs)

    def call(self, func: Any, args: list, kwargs: dict) -> Any:
        self.tick()
        if isinstance(func, FuncRef):
            hook = self.hooks.get(func.name)
            if hook is not None and not isinstance(func.node, ast.Lambda):
                return hook(self, args, kwargs)
            return self.run_function(func, args, kwargs)
        if isinstance(func, External):
            hook = self.hooks.get(func.qualname) or self.hooks.get("*." + func.name)
            if hook is not None:
                return hook(self, args, kwargs)
            return self._builtin(func, args, kwargs)
        if isinstance(func, ClassRef):
            hook = self.hooks.get("class:" + func.name)
            if hook is not None:
                return hook(self, args, kwargs)
            if self.is_enum(func) and args:
                for m in self.enum_members(func):
                    if m.value == args[0] or m.name == args[0]:
                        return m
                return Unknown(f"{func.name}({args[0]!r})")
            return Instance(func)
        if isinstance(func, BoundMethod):
            return self._method(func, args, kwargs)
        if isinstance(func, SuperRef):
            return Unknown("super")
        return Unknown(f"call {func!r}")

    def _method(self, m: BoundMethod, args: list, kwargs: dict) -> Any:
        if hasattr(m.obj, "call_method"):
            return m.obj.call_method(self, m.name, args, kwargs)
        if any(isinstance(a, Unknown) for a in args) and m.name not in {"append", "extend", "insert", "update"}:
            return Unknown(f".{m.name}()")
        try:
            result = getattr(m.obj, m.name)(*args, **kwargs)
        except Exception:
            return Unknown(f".{m.name}()")
        if m.name in ("items", "keys", "values"):
            return _DictView(list(result))
        return result

    def _builtin(self, func: External, args: list, kwargs: dict) -> Any:
        mod, _, name = func.qualname.rpartition(".")
        plain = all(isinstance(a, _PLAIN) or isinstance(a, _DictView) for a in args)
        args = [a.items if isinstance(a, _DictView) else a for a in args]
        if mod == "builtins":
            if name in ("int", "float", "str", "bool") and plain and len(args) <= 1:
                try:
                    return getattr(builtins, name)(*args)
                except Exception:
                    return Unknown(f"{name}()")
            if name in ("list", "tuple", "set", "frozenset", "sorted", "dict", "reversed"):
                if not args:
                    return getattr(builtins, name)(**kwargs) if name == "dict" else getattr(builtins, name)()
                items = self.iterate(args[0]) if not isinstance(args[0], dict) or name != "dict" else args[0]
                if items is None:
                    return Unknown(f"{name}()")
                try:
                    if name == "sorted":
                        return sorted(items, **{k: v for k, v in kwargs.items() if k == "reverse"})
                    if name == "reversed":
                        return list(reversed(items))
                    return getattr(builtins, name)(items)
                except Exception:
                    return Unknown(f"{name}()")
            if name in ("len", "min", "max", "any", "all", "abs", "round", "repr", "range", "enumerate", "zip") and plain:
                try:
                    result = getattr(builtins, name)(*args)
                    return list(result) if name in ("enumerate", "zip") else result
                except Exception:
                    return Unknown(f"{name}()")
            if name == "getattr" and len(args) >= 2 and isinstance(args[1], str):
                value = self.getattr(args[0], args[1])
                if isinstance(value, Unknown) and len(args) == 3:
                    return args[2]
                return value
            if name == "isinstance":
                return Unknown("isinstance")
            return Unknown(f"{name}()")
        if func.qualname in ("typing.get_args",):
            if args and isinstance(args[0], TypeForm):
                return tuple(args[0].args)
            return Unknown("get_args")
        if func.qualname == "copy.deepcopy" or func.qualname == "copy.copy":
            try:
                return copy.deepcopy(args[0])
            except Exception:
                return args[0] if args else Unknown("copy")
        if func.qualname in ("dataclasses.field", "pydantic.Field", "pydantic.fields.Field"):
            return FieldSpec(kwargs.get("default", args[0] if args else MISSING),
                             kwargs.get("default_factory", MISSING), kwargs.get("metadata"))
        if func.qualname in ("dataclasses.fields",) and args and isinstance(args[0], ClassRef):
            return self.dataclass_fields(args[0])
        return Unknown(f"{func.qualname}()")

    def run_function(self, func: FuncRef, args: list, kwargs: dict) -> Any:
        if self.depth >= self.max_depth:
            return Unknown(f"{func.name}() (depth)")
        node = func.node
        scope: dict[str, Any] = {}
        params = node.args
        positional = list(params.posonlyargs) + list(params.args)
        call_args = list(args)
        if func.bound is not None:
            call_args.insert(0, func.bound)
        defaults = [None] * (len(positional) - len(params.defaults)) + list(params.defaults)
        def_frame = Frame(func.module, closure=func.closure)
        for i, p in enumerate(positional):
            if i < len(call_args):
                scope[p.arg] = call_args[i]
            elif p.arg in kwargs:
                scope[p.arg] = kwargs.pop(p.arg)
            elif defaults[i] is not None:
                scope[p.arg] = self.eval(defaults[i], def_frame)
            else:
                scope[p.arg] = Unknown(p.arg)
        if params.vararg is not None:
            scope[params.vararg.arg] = tuple(call_args[len(positional):])
        for p, d in zip(params.kwonlyargs, params.kw_defaults):
            if p.arg in kwargs:
                scope[p.arg] = kwargs.pop(p.arg)
            else:
                scope[p.arg] = self.eval(d, def_frame) if d is not None else Unknown(p.arg)
        if params.kwarg is not None:
            scope[params.kwarg.arg] = dict(kwargs)
        frame = Frame(func.module, scope, func.closure, func.owner, func.bound)
        if isinstance(node, ast.Lambda):
            return self.eval(node.body, frame)
        self.depth += 1
        self.module_stack.append(func.module.name)
        try:
            self.exec_block(node.body, frame)
        except _Return as r:
            return r.value
        except _Abort:
            return Unknown(f"{func.name}() raised")
        finally:
            self.depth -= 1
            self.module_stack.pop()
        return None

    # ------------------------------------------------------------- statements
    def exec_block(self, body: list[ast.stmt], frame: Frame) -> None:
        for stmt in body:
            self.exec_stmt(stmt, frame)

    def exec_stmt(self, stmt: ast.stmt, frame: Frame) -> None:
        self.tick()
        try:
            method = getattr(self, "_s_" + type(stmt).__name__, None)
            if method is not None:
                method(stmt, frame)
        except (_Return, _Break, _Continue, _Abort, BudgetExceeded):
            raise
        except RecursionError:
            raise
        except Exception as exc:  # one bad statement must not stop the walk
            self.errors.append(f"{frame.module.name}:{getattr(stmt, 'lineno', '?')}: {type(exc).__name__}: {exc}")

    def _s_Expr(self, stmt: ast.Expr, frame: Frame) -> None:
        self.eval(stmt.value, frame)

    def _s_Assign(self, stmt: ast.Assign, frame: Frame) -> None:
        value = self.eval(stmt.value, frame)
        for target in stmt.targets:
            self.assign(target, value, frame)

    def _s_AnnAssign(self, stmt: ast.AnnAssign, frame: Frame) -> None:
        if stmt.value is not None:
            self.assign(stmt.target, self.eval(stmt.value, frame), frame)

    def _s_AugAssign(self, stmt: ast.AugAssign, frame: Frame) -> None:
        current = self.eval(stmt.target, frame) if not isinstance(stmt.target, ast.Name) \
            else self.lookup(stmt.target.id, frame)
        value = self.eval(stmt.value, frame)
        if isinstance(current, _PLAIN) and isinstance(value, _PLAIN):
            if isinstance(current, list) and isinstance(stmt.op, ast.Add):
                current.extend(value)  # in place, like Python
                result = current
            else:
                result = _BINOPS[type(stmt.op)](current, value)
        else:
            result = Unknown(_src(stmt))
        self.assign(stmt.target, result, frame)

    def assign(self, target: ast.expr, value: Any, frame: Frame) -> None:
        if isinstance(target, ast.Name):
            frame.locals[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = self.iterate(value)
            if items is None or len(items) != len(target.elts):
                items = [Unknown(_src(e)) for e in target.elts]
            for t, v in zip(target.elts, items):
                self.assign(t, v, frame)
        elif isinstance(target, ast.Subscript):
            container = self.eval(target.value, frame)
            key = self.eval(target.slice, frame)
            if isinstance(container, (dict, list)) and not isinstance(key, Unknown):
                container[key] = value
        elif isinstance(target, ast.Attribute):
            obj = self.eval(target.value, frame)
            if hasattr(obj, "set_attr"):
                obj.set_attr(target.attr, value)

    def _s_Delete(self, stmt: ast.Delete, frame: Frame) -> None:
        for target in stmt.targets:
            if isinstance(target, ast.Subscript):
                container = self.eval(target.value, frame)
                key = self.eval(target.slice, frame)
                if isinstance(container, dict) and key in container:
                    del container[key]
            elif isinstance(target, ast.Name):
                frame.locals.pop(target.id, None)

    def _s_Return(self, stmt: ast.Return, frame: Frame) -> None:
        value = self.eval(stmt.value, frame) if stmt.value is not None else None
        if frame.speculative:
            # a return inside an undecided branch: keep walking the rest of the body
            frame.locals.setdefault("<speculative-return>", value)
            return
        raise _Return(value)

    def _s_If(self, stmt: ast.If, frame: Frame) -> None:
        test = self.eval(stmt.test, frame)
        if is_known(test):
            self.exec_block(stmt.body if test else stmt.orelse, frame)
            return
        frame.speculative += 1
        try:
            self.exec_block(stmt.body, frame)
            self.exec_block(stmt.orelse, frame)
        finally:
            frame.speculative -= 1

    def _s_For(self, stmt: ast.For, frame: Frame) -> None:
        items = self.iterate(self.eval(stmt.iter, frame))
        if items is None:
            return
        for item in items:
            self.assign(stmt.target, item, frame)
            try:
                self.exec_block(stmt.body, frame)
            except _Break:
                return
            except _Continue:
                continue
        self.exec_block(stmt.orelse, frame)

    def _s_Break(self, stmt: ast.Break, frame: Frame) -> None:
        raise _Break()

    def _s_Continue(self, stmt: ast.Continue, frame: Frame) -> None:
        raise _Continue()

    def _s_With(self, stmt: ast.With, frame: Frame) -> None:
        self.exec_block(stmt.body, frame)

    def _s_Try(self, stmt: ast.Try, frame: Frame) -> None:
        self.exec_block(stmt.body, frame)
        self.exec_block(stmt.orelse, frame)
        self.exec_block(stmt.finalbody, frame)

    def _s_Raise(self, stmt: ast.Raise, frame: Frame) -> None:
        if not frame.speculative:
            raise _Abort()

    def _s_FunctionDef(self, stmt: ast.FunctionDef, frame: Frame) -> None:
        frame.locals[stmt.name] = FuncRef(frame.module, stmt, closure=_merged_scope(frame))

    _s_AsyncFunctionDef = _s_FunctionDef

    def _s_Import(self, stmt: ast.Import, frame: Frame) -> None:
        for alias in stmt.names:
            if alias.asname:
                frame.locals[alias.asname] = self.import_module(alias.name)
            else:
                top = alias.name.split(".")[0]
                frame.locals[top] = self.import_module(top)

    def _s_ImportFrom(self, stmt: ast.ImportFrom, frame: Frame) -> None:
        base = frame.module._absolute(stmt.module, stmt.level)
        for alias in stmt.names:
            if alias.name != "*":
                frame.locals[alias.asname or alias.name] = self.import_from(base, alias.name)

    # ------------------------------------------------------------ annotations
    def eval_annotation(self, node: ast.expr, module: Module) -> Any:
        """Evaluate a type annotation; string annotations are parsed first."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                node = ast.parse(node.value, mode="eval").body
            except SyntaxError:
                return Unknown(node.value)
        value = self.eval(node, Frame(module))
        if isinstance(value, str):  # a forward reference stored in an alias
            return self.eval_annotation(ast.Constant(value), module)
        return value


class _DictView:
    """``d.items()`` / ``d.keys()``: a snapshot list the interpreter can iterate."""

    __slots__ = ("items",)

    def __init__(self, items: list):
        self.items = items


def _weak(value: Any) -> bool:
    return isinstance(value, Unknown) or (
        isinstance(value, External) and value.qualname in ("typing.Any", "builtins.object"))


def _typish(value: Any) -> bool:
    return value is None or isinstance(value, (TypeForm, ClassRef)) or (
        isinstance(value, External))


def _identity_known(value: Any) -> bool:
    return value is None or value is MISSING or isinstance(value, (bool, EnumMember))


def _has_unknown(value: Any) -> bool:
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(isinstance(v, Unknown) for v in value)
    return False


def _is_classvar(annotation: ast.expr) -> bool:
    text = _src(annotation)
    return text.startswith(("ClassVar", "typing.ClassVar", "InitVar", "dataclasses.InitVar")) or \
        text.strip("'\"").startswith("ClassVar")


def _merged_scope(frame: Frame) -> dict:
    scope = dict(frame.closure or {})
    scope.update(frame.locals)
    return scope


def _src(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except Exception:
        return type(node).__name__
    return text if len(text) <= 80 else text[:77] + "..."
