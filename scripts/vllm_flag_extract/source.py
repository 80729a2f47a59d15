"""The unpacked vLLM source tree, its modules' top-level names, and the value types
the symbolic evaluator passes around.

A :class:`SourceTree` maps dotted module names (``vllm.config.cache``) to parsed
:class:`Module` objects. A module's globals are indexed once (imports,
assignments, classes, functions) and evaluated lazily by the evaluator.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class Unknown:
    """A value the evaluator could not compute; carries source text for reports."""

    __slots__ = ("text",)

    def __init__(self, text: str = "?"):
        self.text = text

    def __repr__(self) -> str:
        return f"Unknown({self.text!r})"


class Missing:
    """``dataclasses.MISSING``: a field without a default."""

    _instance: Missing | None = None

    def __new__(cls) -> Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"


MISSING = Missing()


@dataclass(frozen=True)
class External:
    """A name from outside the vllm package (``argparse.BooleanOptionalAction``,
    ``json.loads``, ``torch.dtype``), identified by its dotted name."""

    qualname: str

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class ModuleRef:
    name: str


@dataclass
class TypeForm:
    """A typing construct: ``literal`` (args = values), ``union``, ``generic``
    (origin = list/dict/tuple/set/type/..., args = element types)."""

    kind: str
    args: tuple = ()
    origin: str = ""


@dataclass
class FieldSpec:
    """``dataclasses.field(...)`` / ``pydantic.Field(...)`` as written."""

    default: Any = MISSING
    default_factory: Any = MISSING
    metadata: Any = None


@dataclass
class DataclassField:
    name: str
    annotation: ast.expr
    module: Module
    default: Any = MISSING          # evaluated default value (or FieldSpec)
    default_node: ast.expr | None = None


@dataclass
class Instance:
    """An opaque instance of a vllm class (e.g. a config created by a default_factory)."""

    cls: ClassRef

    def __repr__(self) -> str:
        return f"{self.cls.name}()"


@dataclass(eq=False)
class EnumMember:
    cls: ClassRef
    name: str
    value: Any

    def __repr__(self) -> str:
        return f"{self.cls.name}.{self.name}"


@dataclass(eq=False)
class ClassRef:
    module: Module
    node: ast.ClassDef
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def qualname(self) -> str:
        return f"{self.module.name}.{self.node.name}"

    def __repr__(self) -> str:
        return f"<class {self.qualname}>"

    def __hash__(self) -> int:
        return hash(self.qualname)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClassRef) and other.qualname == self.qualname

    def decorator_names(self) -> list[str]:
        names = []
        for dec in self.node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            if isinstance(target, ast.Name):
                names.append(target.id)
            elif isinstance(target, ast.Attribute):
                names.append(target.attr)
        return names


@dataclass(eq=False)
class FuncRef:
    module: Module
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
    bound: Any = None               # cls/self for methods, None otherwise
    owner: ClassRef | None = None   # class whose body defines it (for super())
    closure: dict | None = None     # enclosing locals for nested functions / lambdas

    @property
    def name(self) -> str:
        return getattr(self.node, "name", "<lambda>")

    def __repr__(self) -> str:
        return f"<function {self.module.name}.{self.name}>"


@dataclass(eq=False)
class SuperRef:
    owner: ClassRef
    obj: Any


class Module:
    """One parsed source file and an index of its top-level names."""

    def __init__(self, name: str, path: Path, tree: ast.Module, is_package: bool):
        self.name = name
        self.path = path
        self.tree = tree
        self.is_package = is_package
        # name -> list of candidate definitions, in source order
        self.defs: dict[str, list[tuple[str, Any]]] = {}
        self.values: dict[str, Any] = {}   # evaluated cache
        self._index(tree.body)

    @property
    def package(self) -> str:
        return self.name if self.is_package else self.name.rpartition(".")[0]

    def _add(self, name: str, kind: str, payload: Any) -> None:
        self.defs.setdefault(name, []).append((kind, payload))

    def _index(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if alias.asname:
                        self._add(alias.asname, "module", alias.name)
                    else:
                        top = alias.name.split(".")[0]
                        self._add(top, "module", top)
            elif isinstance(stmt, ast.ImportFrom):
                base = self._absolute(stmt.module, stmt.level)
                for alias in stmt.names:
                    if alias.name == "*":
                        continue
                    self._add(alias.asname or alias.name, "from", (base, alias.name))
            elif isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    if isinstance(target, ast.Name):
                        self._add(target.id, "expr", stmt.value)
            elif isinstance(stmt, ast.AnnAssign):
                if isinstance(stmt.target, ast.Name) and stmt.value is not None:
                    self._add(stmt.target.id, "expr", stmt.value)
            elif isinstance(stmt, ast.ClassDef):
                self._add(stmt.name, "class", stmt)
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._add(stmt.name, "func", stmt)
            elif isinstance(stmt, ast.If):
                # TYPE_CHECKING blocks hold the real imports; both branches are
                # indexed and the evaluator prefers a definition that resolves.
                self._index(stmt.body)
                self._index(stmt.orelse)
            elif isinstance(stmt, ast.Try):
                self._index(stmt.body)
                for handler in stmt.handlers:
                    self._index(handler.body)
                self._index(stmt.orelse)
                self._index(stmt.finalbody)

    def _absolute(self, module: str | None, level: int) -> str:
        if level == 0:
            return module or ""
        parts = self.package.split(".")
        if level > 1:
            parts = parts[: len(parts) - (level - 1)]
        base = ".".join(parts)
        return f"{base}.{module}" if module else base

    def find_class(self, name: str) -> ast.ClassDef | None:
        for kind, payload in self.defs.get(name, []):
            if kind == "class":
                return payload
        return None


class SourceTree:
    """Parsed modules under one root directory (the one holding ``vllm/``)."""

    def __init__(self, root: Path, package: str = "vllm"):
        self.root = Path(root)
        self.package = package
        self._modules: dict[str, Module | None] = {}

    def has_module(self, name: str) -> bool:
        return self._locate(name) is not None

    def _locate(self, name: str) -> tuple[Path, bool] | None:
        rel = Path(*name.split("."))
        as_file = self.root / rel.with_suffix(".py")
        if as_file.is_file():
            return as_file, False
        as_pkg = self.root / rel / "__init__.py"
        if as_pkg.is_file():
            return as_pkg, True
        return None

    def module(self, name: str) -> Module | None:
        if name in self._modules:
            return self._modules[name]
        found = self._locate(name) if name.split(".")[0] == self.package else None
        mod = None
        if found is not None:
            path, is_pkg = found
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            except SyntaxError:
                tree = None
            if tree is not None:
                mod = Module(name, path, tree, is_pkg)
        self._modules[name] = mod
        return mod

    def read_text(self, name: str) -> str:
        found = self._locate(name)
        return found[0].read_text(encoding="utf-8") if found else ""
