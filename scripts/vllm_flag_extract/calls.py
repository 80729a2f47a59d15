"""Calls in the evaluator: hooks, interpreted vllm functions, allow-listed builtins and methods."""

from __future__ import annotations

import ast
import builtins
import copy
from typing import Any

from .runtime import PLAIN, AbortSignal, BoundMethod, DictView, Frame, ReturnSignal
from .source import MISSING, ClassRef, External, FieldSpec, FuncRef, Instance, SuperRef, TypeForm, Unknown


class Calls:
    """Mixed into :class:`~.evaluator.Evaluator`; relies on its ``eval``/``call``."""

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
            if self.is_dict_subclass(func):  # e.g. MultiModalDummyOptions() -> {}
                return dict(args[0]) if args and isinstance(args[0], dict) else {}
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
            return DictView(list(result))
        return result

    def _builtin(self, func: External, args: list, kwargs: dict) -> Any:
        mod, _, name = func.qualname.rpartition(".")
        plain = all(isinstance(a, PLAIN) or isinstance(a, DictView) for a in args)
        args = [a.items if isinstance(a, DictView) else a for a in args]
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
        if func.qualname == "typing.cast" and len(args) == 2:
            return args[1]
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
        except ReturnSignal as r:
            return r.value
        except AbortSignal:
            return Unknown(f"{func.name}() raised")
        finally:
            self.depth -= 1
            self.module_stack.pop()
        return None

