"""Classes as the evaluator sees them: MRO, enums, dataclass fields, class attributes."""

from __future__ import annotations

import ast
from typing import Any

from .runtime import ENUM_BASES, Frame, is_classvar
from .source import MISSING, ClassRef, DataclassField, EnumMember, External, FieldSpec, FuncRef, TypeForm, Unknown


class ClassModel:
    """Mixed into :class:`~.evaluator.Evaluator`; relies on its ``eval``/``call``."""

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
        return bool(self.external_bases(cls) & ENUM_BASES)

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
                if is_classvar(stmt.annotation):
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

