"""Environment variables of one vLLM release (``vllm/envs.py``) and their defaults.

Each entry of ``environment_variables`` is a getter (usually a lambda around
``os.getenv``). The default is what that getter returns in an empty
environment, computed by the interpreter; when it cannot be computed, the value
written in the ``if TYPE_CHECKING:`` block is used, and failing that the
default is ``null`` with a ``default_repr``.
"""

from __future__ import annotations

import ast
from typing import Any

from .argspec import to_json
from .kwargs import flatten_hints
from .evaluator import Evaluator, Frame
from .source import FuncRef, Unknown


def _getenv(ev: Evaluator, args: list, kwargs: dict) -> Any:
    if len(args) >= 2:
        return args[1]
    return kwargs.get("default")


def _path_join(ev: Evaluator, args: list, kwargs: dict) -> Any:
    if args and all(isinstance(a, str) for a in args):
        return "/".join(a.rstrip("/") for a in args[:-1]) + "/" + args[-1] if len(args) > 1 else args[0]
    return Unknown("os.path.join()")


def _identity(ev: Evaluator, args: list, kwargs: dict) -> Any:
    # ``~`` stays unexpanded: the table must not hold this machine's home directory
    return args[0] if args else Unknown("os.path")


ENV_HOOKS = {
    "os.getenv": _getenv,
    "os.environ.get": _getenv,
    "os.path.join": _path_join,
    "os.path.expanduser": _identity,
    "os.path.expandvars": _identity,
    "os.path.abspath": _identity,
}


def _type_tag(ev: Evaluator, annotation: ast.expr, module) -> str:
    atoms = flatten_hints(ev, ev.eval_annotation(annotation, module))
    kinds = {a[0] for a in atoms} - {"none"}
    for kind in ("bool", "int", "float"):
        if kinds == {kind}:
            return kind
    if "list" in kinds:
        return "list"
    if "dict" in kinds:
        return "json"
    return "str"


def extract_env(ev: Evaluator) -> dict[str, dict]:
    mod = ev.module("vllm.envs")
    if mod is None:
        return {}
    ev.externals["os.environ"] = {}
    for name, hook in ENV_HOOKS.items():
        ev.hooks.setdefault(name, hook)

    declared: dict[str, tuple[ast.expr, ast.expr | None]] = {}
    table: ast.Dict | None = None
    for stmt in mod.tree.body:
        if isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Name) and stmt.test.id == "TYPE_CHECKING":
            for sub in stmt.body:
                if isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name):
                    declared[sub.target.id] = (sub.annotation, sub.value)
        target = None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign):
            target, value = stmt.target, stmt.value
        if isinstance(target, ast.Name) and target.id == "environment_variables" and isinstance(value, ast.Dict):
            table = value

    out: dict[str, dict] = {}
    if table is None:
        return out
    for key_node, getter_node in zip(table.keys, table.values):
        if not (isinstance(key_node, ast.Constant) and isinstance(key_node.value, str)):
            continue
        name = key_node.value
        entry: dict[str, Any] = {}
        if name in declared:
            entry["type"] = _type_tag(ev, declared[name][0], mod)
        value: Any = Unknown(name)
        try:
            getter = ev.eval(getter_node, Frame(mod))
            value = ev.call(getter, [], {}) if isinstance(getter, FuncRef) else Unknown(name)
        except Exception:
            value = Unknown(name)
        if isinstance(value, Unknown) and name in declared and declared[name][1] is not None:
            try:
                value = ev.eval(declared[name][1], Frame(mod))
            except Exception:
                value = Unknown(name)
        json_value, rep = to_json(value)
        entry["default"] = json_value
        if rep is not None:
            entry["default_repr"] = rep
        out[name] = entry
    return out
