"""oomguard.lazy_re: re's behaviour, compiled on first use (diagnose's start-up)."""

from __future__ import annotations

import ast
import json
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

from oomguard import lazy_re


@pytest.mark.parametrize("pattern, flags", [(r"(\d+) GiB", 0), (r"out of memory", re.IGNORECASE), (rb"\bOOM\b", 0),
                                            (r"^x$", re.MULTILINE | re.ASCII)])
def test_same_answers_and_attributes_as_re(pattern, flags):
    lazy, real = lazy_re.compile(pattern, flags), re.compile(pattern, flags)
    assert (lazy.pattern, lazy.flags) == (real.pattern, real.flags)
    assert lazy._compiled is None  # nothing compiled by reading pattern and flags
    text = "12 GiB\nOut Of Memory\nx" if isinstance(pattern, str) else b"an OOM here"
    assert lazy.search(text) is not None and lazy.search(text).group() == real.search(text).group()
    assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in real.finditer(text)]
    assert lazy.groups == real.groups and lazy == real and hash(lazy) == hash(lazy_re.compile(pattern, flags))
    assert pickle.loads(pickle.dumps(lazy)) == lazy
    assert lazy_re.is_pattern(lazy) and lazy_re.is_pattern(real) and not lazy_re.is_pattern(pattern)


def test_a_bad_pattern_fails_when_used():
    lazy = lazy_re.compile("(unclosed")
    with pytest.raises(re.error):
        lazy.search("x")


def test_importing_diagnose_parsers_compiles_no_cue_pattern():
    code = ("from oomguard.diagnose.parsers import cues, errors, memory\n"
            "from oomguard.diagnose.parsers.scanset import module_patterns\n"
            "compiled = [r.feature for r in cues.TABLE if r.pattern._compiled is not None]\n"
            "compiled += [n for m in (errors, memory) for n, p in module_patterns(m).values()\n"
            "             if getattr(p, '_compiled', None) is not None]\n"
            "print(len(cues.TABLE), compiled)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split(None, 1)
    assert int(out[0]) > 50 and out[1].strip() == "[]"


# -- one way to write a pattern, and no identity test on one (src/ read as Python, not as text) ----------------

SRC = Path(__file__).resolve().parents[2] / "src" / "oomguard"
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _import_time_nodes(tree: ast.Module):
    """Every node run when the module is imported (function bodies are not; class bodies are)."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, _DEFS):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _is_call_of(node: ast.AST, module: str) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "compile"
            and isinstance(node.func.value, ast.Name) and node.func.value.id == module)


def _eager_compiles(path: Path) -> list[int]:
    """Lines where ``path`` runs ``re.compile(`` at import."""
    return sorted(n.lineno for n in _import_time_nodes(ast.parse(path.read_text(encoding="utf-8")))
                  if _is_call_of(n, "re"))


def _module_file(name: str) -> Path:
    base = SRC.parent / name.replace(".", "/")
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def _start_up_modules(tmp: Path) -> set[str]:
    """The oomguard modules plan --json, check, fit and diagnose import (the start-up oomguard keeps small;
    diagnose's readers, scanner and fix modules among them)."""
    log = tmp / "vllm.log"
    log.write_text("ERROR 01-01 00:00:03 [gpu_worker.py:1] torch.OutOfMemoryError: CUDA out of memory. Tried to "
                   "allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.2 GiB is free.\n")
    code = ("import contextlib, io, sys\nfrom oomguard.cli.main import main\n"
            "for argv in (['plan', '--model', 'Qwen/Qwen3-8B', '--gpu', 'H100', '--json'],\n"
            "             ['check', '--model', 'Qwen/Qwen3-8B', '--gpu', 'H100', '--format', 'json'],\n"
            "             ['fit', '--model', 'Qwen/Qwen3-8B', '--gpu', 'H100', '--context', '8192', '--format', 'json'],\n"
            f"             ['diagnose', {str(log)!r}, '--format', 'json']):\n"
            "    with contextlib.redirect_stdout(io.StringIO()):\n"
            "        assert main(argv) in (0, 1), argv\n"
            "print(' '.join(m for m in sys.modules if m.startswith('oomguard')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(done.stdout.split())


def test_lazy_paths_compile_no_pattern_at_import(tmp_path):
    """Where lazy compilation matters, patterns are written one way (``lazy_re.compile``): diagnose's parsers
    (the byte scan selects a few of their ~320 patterns a log), its readers, scanner and fix modules, every
    module that already writes lazy patterns, and every module plan/check/fit/diagnose import at start-up."""
    lazy_users = {p for p in SRC.rglob("*.py") if "lazy_re" in p.read_text(encoding="utf-8") and p.name != "lazy_re.py"}
    paths = set((SRC / "diagnose" / "parsers").glob("*.py")) | lazy_users
    paths |= {SRC / "diagnose" / "readers.py", SRC / "diagnose" / "scanner.py", *(SRC / "diagnose").glob("fixes*.py")}
    started = _start_up_modules(tmp_path)
    assert {"oomguard.diagnose.readers", "oomguard.diagnose.scanner", "oomguard.diagnose.fixes"} <= started
    paths |= {_module_file(m) for m in started}
    assert len(paths) > 40
    eager = {str(p.relative_to(SRC)): lines for p in sorted(paths) if (lines := _eager_compiles(p))}
    assert eager == {}, f"re.compile at import on a lazy path (write lazy_re.compile): {eager}"


def test_the_eager_scan_finds_what_it_looks_for(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import re\n_A = re.compile('a')\n_B = tuple(re.compile(p) for p in 'bc')\nclass C:\n    X = re.compile('x')\n"
                 "def f():\n    return re.compile('late')\n")
    assert _eager_compiles(f) == [2, 3, 5]


def _pattern_names(tree: ast.Module) -> set[str]:
    """Names the module binds at import to a compiled or lazy pattern."""
    names = set()
    for node in _import_time_nodes(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and (
                _is_call_of(node.value, "re") or _is_call_of(node.value, "lazy_re")):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def _identity_tests_on_patterns(source: str) -> list[int]:
    """Lines comparing patterns with ``is`` / ``is not``: a match's ``.re``, a lazy pattern's ``.compiled``, or a
    module's own pattern name (a lazy pattern is never the compiled one, so the test is silently False)."""
    tree = ast.parse(source)
    names = _pattern_names(tree)

    def patternish(node: ast.AST) -> bool:
        return ((isinstance(node, ast.Attribute) and node.attr in ("re", "compiled"))
                or (isinstance(node, ast.Name) and node.id in names))

    return sorted({n.lineno for n in ast.walk(tree) if isinstance(n, ast.Compare)
                  and any(isinstance(op, (ast.Is, ast.IsNot)) for op in n.ops)
                  and any(patternish(x) for x in (n.left, *n.comparators))})


def test_the_identity_scan_finds_what_it_looks_for():
    bad = ("import re\nimport oomguard.lazy_re as lazy_re\n_A = lazy_re.compile('a')\n"
           "def f(m):\n    return m.re is _A.compiled or m.re is not _A or _A is m.re\n")
    assert _identity_tests_on_patterns(bad) == [5]
    assert _identity_tests_on_patterns("def f(m, x):\n    return m is None or m.re == x\n") == []
    m = lazy_re.compile("a").search("a")
    assert m is not None and m.re == lazy_re.compile("a")  # what code writes instead: equality holds


def test_no_identity_test_on_a_pattern_in_src():
    found = {str(p.relative_to(SRC)): lines for p in sorted(SRC.rglob("*.py"))
             if (lines := _identity_tests_on_patterns(p.read_text(encoding="utf-8")))}
    assert found == {}, f"patterns compared by identity (compare by equality, or keep each match apart): {found}"


@pytest.mark.parametrize("text, want", [
    ("INFO 05-01 10:00:00 [executor_base.py:110] # CUDA blocks: 2048, # CPU blocks: 512\n",
     {"num_gpu_blocks": 2048, "num_cpu_blocks": 512}),
    ("GPU blocks: 77\n", {"num_gpu_blocks": 77}),
])
def test_blocks_line_read_with_and_without_cpu_blocks(tmp_path, text, want):
    """parsers/memory.py told its two block patterns apart by ``m.re is _BLOCKS.compiled`` (real CLI)."""
    log = tmp_path / "vllm.log"
    log.write_text(text)
    done = subprocess.run([sys.executable, "-m", "oomguard.cli.main", "diagnose", str(log), "--format", "json"],
                          capture_output=True, text=True)
    assert done.returncode in (0, 1, 3), done.stderr
    facts = {f["name"]: f["value"] for f in json.loads(done.stdout)["facts"]["memory"] if "blocks" in f["name"]}
    assert facts == want
