"""The import graph: every module imports on its own, and imports point one way.

- Each module of ``oomguard`` is imported alone, in a process where no other oomguard
  module is loaded yet (one fresh interpreter forks a child per module): a module that
  only works when another one happened to be imported first fails here.
- No import cycle between oomguard packages (``oomguard.check`` -> ``oomguard.inputs``
  and back), and none between modules either, except a package's ``__init__``
  re-exporting its own submodules (``oomguard.versions`` and ``versions.table``).
  Imports inside functions count: a lazy import is still a dependency. The graph is
  read from the source (``ast``), so the test is fast and names the cycle it finds.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PKG = SRC / "oomguard"


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        parts = p.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The oomguard modules ``name`` imports, anywhere in its body."""
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [mod] + [f"{mod}.{a.name}" for a in node.names]
        for t in targets:
            if not t.startswith("oomguard"):
                continue
            while t and t not in modules:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_no_import_cycle_between_packages():
    packages: dict[str, set[str]] = defaultdict(set)
    for a, targets in _graph().items():
        for b in targets:
            if _package(a) != _package(b):
                packages[_package(a)].add(_package(b))
    assert _cycles(packages) == []


def _reexport(cycle: list[str]) -> bool:
    """A package __init__ and its own submodules (the __init__ re-exports them)."""
    heads = [m for m in cycle if all(x == m or x.startswith(m + ".") for x in cycle)]
    return bool(heads)


def test_no_import_cycle_between_modules():
    bad = [c for c in _cycles(_graph()) if not _reexport(c)]
    assert bad == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in bad)


def test_the_cycle_check_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    assert not _reexport(["oomguard.check.registry", "oomguard.check.rules", "oomguard.check.rules.flags"])
    assert _reexport(["oomguard.versions", "oomguard.versions.table"])


_CHILD = r"""
import importlib, os, sys, traceback
names = sys.argv[1:]
failed = []
for name in names:
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(name)
        except BaseException:
            sys.stderr.write(f"--- {name}\n" + traceback.format_exc(limit=3))
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        failed.append(name)
print(" ".join(failed))
"""


def test_every_module_imports_on_its_own():
    names = sorted(_modules())
    assert len(names) > 100
    p = subprocess.run([sys.executable, "-c", _CHILD, *names], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip() == "", f"modules that fail to import alone: {p.stdout.strip()}\n{p.stderr[-3000:]}"
