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
from .calls import Calls
from .classmodel import ClassModel
from .runtime import (
    ANNOTATING,
    BINOPS,
    CMPOPS,
    GENERIC_ALIASES,
    IN_PROGRESS,
    METHOD_ALLOW,
    PLAIN,
    TYPING_MODULES,
    BoundMethod,
    BudgetExceeded,
    DictView,
    Frame,
    has_unknown,
    identity_known,
    is_known,
    is_typish,
    is_weak,
    merged_scope,
    src_text,
)
from .statements import Statements

Hook = Callable[["Evaluator", list, dict], Any]

__all__ = ["BudgetExceeded", "Evaluator", "Frame", "Hook", "is_known"]


class Evaluator(ClassModel, Calls, Statements):
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
        self.externals: dict[str, Any] = {
            "ssl.CERT_NONE": 0, "ssl.CERT_OPTIONAL": 1, "ssl.CERT_REQUIRED": 2,
        }
        self.module_stack: list[str] = []  # modules of the functions being run

    # ------------------------------------------------------------------ names
    def module(self, name: str) -> Module | None:
        return self.tree.module(name)

    def global_value(self, module: Module, name: str) -> Any:
        cached = module.values.get(name, MISSING)
        if cached is IN_PROGRESS:
            return Unknown(f"{module.name}.{name} (cycle)")
        if cached is not MISSING:
            return cached
        candidates = module.defs.get(name)
        if not candidates:
            return MISSING
        module.values[name] = IN_PROGRESS
        chosen: Any = Unknown(f"{module.name}.{name}")
        for kind, payload in candidates:
            value = self._definition(module, kind, payload)
            chosen = value
            if not is_weak(value):
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
            if base in TYPING_MODULES or base == "collections.abc":
                return External(f"typing.{name}") if base in TYPING_MODULES else External(f"{base}.{name}")
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

    # ------------------------------------------------------------ expressions
    def tick(self) -> None:
        self.steps += 1
        if self.steps > self.budget:
            raise BudgetExceeded()

    def eval(self, node: ast.AST, frame: Frame) -> Any:
        self.tick()
        method = getattr(self, "_e_" + type(node).__name__, None)
        if method is None:
            return Unknown(src_text(node))
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
        allowed = METHOD_ALLOW.get(type(obj))
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
            if name in ANNOTATING:  # pydantic's SkipValidation[X] is Annotated[X, ...]
                return args[0]
            if mod in TYPING_MODULES or mod == "builtins" or mod == "collections.abc":
                if name == "Literal":
                    flat = []
                    for a in args:
                        flat.extend(a.args if isinstance(a, TypeForm) and a.kind == "literal" else [a])
                    return TypeForm("literal", tuple(flat))
                if name == "Optional":
                    return TypeForm("union", (args[0], None))
                if name == "Union":
                    return TypeForm("union", tuple(args))
                if name in GENERIC_ALIASES:
                    return TypeForm("generic", tuple(args), GENERIC_ALIASES[name])
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
                    out.append(Unknown(src_text(e)))
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
                    return Unknown(src_text(node))
                parts.append(str(value))
        return "".join(parts)

    def _e_BinOp(self, node: ast.BinOp, frame: Frame) -> Any:
        left = self.eval(node.left, frame)
        right = self.eval(node.right, frame)
        if isinstance(node.op, ast.BitOr) and (is_typish(left) or is_typish(right)):
            return TypeForm("union", (left, right))
        if isinstance(left, PLAIN) and isinstance(right, PLAIN):
            try:
                return BINOPS[type(node.op)](left, right)
            except Exception:
                return Unknown(src_text(node))
        return Unknown(src_text(node))

    def _e_UnaryOp(self, node: ast.UnaryOp, frame: Frame) -> Any:
        operand = self.eval(node.operand, frame)
        if isinstance(node.op, ast.Not):
            return (not operand) if is_known(operand) else Unknown(src_text(node))
        if isinstance(operand, (int, float)):  # bool is an int
            return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}[type(node.op)](operand)
        return Unknown(src_text(node))

    def _e_BoolOp(self, node: ast.BoolOp, frame: Frame) -> Any:
        is_and = isinstance(node.op, ast.And)
        value: Any = None
        for v in node.values:
            value = self.eval(v, frame)
            if not is_known(value):
                return Unknown(src_text(node))
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
                elif identity_known(left) and identity_known(right):
                    result = CMPOPS[type(op)](left, right)
                else:
                    return Unknown(src_text(node))
            elif isinstance(left, PLAIN) and isinstance(right, PLAIN) and not has_unknown(right):
                try:
                    result = CMPOPS[type(op)](left, right)
                except Exception:
                    return Unknown(src_text(node))
            else:
                return Unknown(src_text(node))
            if not result:
                return False
            left = right
        return True

    def _e_IfExp(self, node: ast.IfExp, frame: Frame) -> Any:
        test = self.eval(node.test, frame)
        if not is_known(test):
            return Unknown(src_text(node))
        return self.eval(node.body if test else node.orelse, frame)

    def _e_Lambda(self, node: ast.Lambda, frame: Frame) -> Any:
        return FuncRef(frame.module, node, closure=merged_scope(frame))

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
        return out if ok else Unknown(src_text(node))

    _e_GeneratorExp = _e_ListComp

    def _e_SetComp(self, node: ast.SetComp, frame: Frame) -> Any:
        out = self._e_ListComp(node, frame)  # type: ignore[arg-type]
        try:
            return set(out) if isinstance(out, list) else out
        except TypeError:
            return Unknown(src_text(node))

    def _e_DictComp(self, node: ast.DictComp, frame: Frame) -> Any:
        out: dict = {}

        def emit(f: Frame) -> None:
            key = self.eval(node.key, f)
            try:
                out[key] = self.eval(node.value, f)
            except TypeError:
                pass

        ok = self._comprehension(node.generators, frame, emit)
        return out if ok else Unknown(src_text(node))

    def _e_Starred(self, node: ast.Starred, frame: Frame) -> Any:
        return Unknown(src_text(node))

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
        if isinstance(value, DictView):
            return list(value.items)
        return None

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


